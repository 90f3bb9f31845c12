"""Family and owner of a model from its id (NT App. C.1).

Family membership is a unique, case-insensitive match on the model id against the frozen
patterns below; models matching none are ``OTHER`` and models matching several are
``AMBIGUOUS`` (later audits exclude both). The owner is the uploader component of a Hugging
Face id ``owner/name`` (text before the first ``/``); ids without one get ``UNKNOWN_OWNER``.

Harness model names carry the provider that served the model in front (Inspect AI:
``openai/gpt-4o``, ``hf/meta-llama/Llama-3.1-8B``, ``vllm/Qwen/Qwen2-7B``; lm-eval API models), so
a provider is dropped where a hub organisation follows it: a leading component in
:data:`PROVIDERS` is removed when the id has at least two more components (``hf/meta-llama/X`` ->
``meta-llama``, ``vllm/Qwen/Qwen2-7B`` -> ``Qwen``, ``openrouter/anthropic/claude-3`` -> ``anthropic``).
With one more component the first stays the owner, as in a hub id: a model maker's API is right
(``openai/gpt-4o`` -> ``openai``, ``anthropic/claude-3-5-sonnet`` -> ``anthropic``), a serving provider
with a bare model name is not (``ollama/llama3`` -> ``ollama``), but cannot be told from a hub
organisation of the same name (``cerebras/Cerebras-GPT-13B`` is a Hugging Face id). Pass ``--models CSV``
(:func:`~bayesirt.data.io.attach_metadata`) to set the owners such ids should have.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

__all__ = ["FAMILIES", "OTHER", "AMBIGUOUS", "UNKNOWN_OWNER", "PROVIDERS", "derive_family",
           "derive_owner"]


FAMILIES: tuple[str, ...] = ("Qwen", "Llama", "Gemma", "Mistral/Mixtral", "Phi")
"""The five families of NT App. C.1, in the paper's order."""


OTHER = "other"
"""Family label of a model id matching no family pattern."""


AMBIGUOUS = "ambiguous"
"""Family label of a model id matching more than one family pattern."""


UNKNOWN_OWNER = "unknown"
"""Owner label of a model id without an ``owner/`` prefix."""


PROVIDERS: frozenset[str] = frozenset({
    # Inspect AI model providers (@modelapi names in inspect_ai/model/_providers, 0.3.285)
    "anthropic", "azureai", "bedrock", "cloudflare", "deepseek", "fireworks", "google", "grok", "groq", "hf",
    "hf-inference-providers", "litellm-proxy", "llama-cpp-python", "meta", "mistral", "mockllm", "moonshot",
    "nnterp", "ollama", "openai", "openai-api", "openai-api-completions", "openrouter", "perplexity", "sagemaker",
    "sambanova", "sglang", "together", "transformer_lens", "vllm", "vllm-completions",
})
"""Leading components of harness model names that name the serving provider (dropped when a hub
organisation follows: three or more components)."""


_TOKEN_SPLIT = re.compile(r"[\W_]+")  # non-alphanumeric characters (underscore included)


def _substring(*needles: str):
    return lambda low, tokens: any(n in low for n in needles)


def _phi(low: str, tokens: list[str]) -> bool:
    return any(t.startswith("phi") for t in tokens)


_RULES = (
    ("Qwen", _substring("qwen")),
    ("Llama", _substring("llama")),
    ("Gemma", _substring("gemma")),
    ("Mistral/Mixtral", _substring("mistral", "mixtral")),
    ("Phi", _phi),
)


def _family_of(model_id: str) -> str:
    low = str(model_id).lower()
    tokens = _TOKEN_SPLIT.split(low)
    hits = [family for family, rule in _RULES if rule(low, tokens)]
    if not hits:
        return OTHER
    return hits[0] if len(hits) == 1 else AMBIGUOUS


def _owner_of(model_id: str) -> str:
    parts = str(model_id).split("/")
    if len(parts) >= 3 and parts[0].strip().lower() in PROVIDERS:
        parts = parts[1:]  # a hub organisation follows the provider
    owner = parts[0]
    return owner if len(parts) > 1 and owner.strip() else UNKNOWN_OWNER


def derive_family(model_ids: Iterable[str]) -> np.ndarray:
    """Family of each model id by the NT C.1 rules.

    Patterns (case-insensitive): ``Qwen`` <- contains "qwen"; ``Llama`` <- "llama";
    ``Gemma`` <- "gemma"; ``Mistral/Mixtral`` <- "mistral" or "mixtral"; ``Phi`` <- a token
    beginning with "phi", tokens being split on non-alphanumeric characters (so
    "microsoft/Phi-3-mini" and "phi-2" are Phi but "dolphin" is not).

    Parameters
    ----------
    model_ids : iterable of str
        Model ids (any shape of array-like; strings are not split into characters).

    Returns
    -------
    numpy.ndarray of str
        Same shape as the input; one of ``FAMILIES``, ``OTHER`` or ``AMBIGUOUS`` per id.

    Examples
    --------
    >>> derive_family(["Qwen/Qwen2-7B", "microsoft/phi-2", "cognitivecomputations/dolphin-2.9", "x/Llama-qwen-merge"])
    array(['Qwen', 'Phi', 'other', 'ambiguous'], dtype='<U15')
    """
    arr = np.asarray([model_ids] if isinstance(model_ids, str) else list(model_ids), dtype=object)
    out = np.array([_family_of(m) for m in arr.ravel()], dtype="<U15").reshape(arr.shape)
    return out


def derive_owner(model_ids: Iterable[str]) -> np.ndarray:
    """Owner (uploader) of each model id: the text before the first ``/``, after a serving provider.

    A harness's provider prefix is dropped where a hub organisation follows it (see the module
    docstring): ``hf/meta-llama/X`` -> ``meta-llama``, ``openai/gpt-4o`` -> ``openai``,
    ``vllm/Qwen/Qwen2-7B`` -> ``Qwen``.

    Parameters
    ----------
    model_ids : iterable of str
        Model ids such as ``"meta-llama/Llama-3.1-8B"``.

    Returns
    -------
    numpy.ndarray of str
        Same shape as the input; ``UNKNOWN_OWNER`` for ids without ``/`` (or with an empty owner).

    Examples
    --------
    >>> derive_owner(["meta-llama/Llama-3.1-8B", "GPT-4o", "hf/Qwen/Qwen2-7B", "openai/gpt-4o"])
    array(['meta-llama', 'unknown', 'Qwen', 'openai'], dtype='<U10')
    """
    arr = np.asarray([model_ids] if isinstance(model_ids, str) else list(model_ids), dtype=object)
    return np.array([_owner_of(m) for m in arr.ravel()], dtype=str).reshape(arr.shape)
