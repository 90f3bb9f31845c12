"""The grammar of the ``bayesirt`` command line: every subcommand, its arguments and their help
(:func:`build_parser`). What the commands do is in :mod:`.main`."""

from __future__ import annotations

import argparse

from bayesirt import __version__
from bayesirt.inference.methods import METHODS, SAMPLERS

__all__ = ["build_parser"]


_DATA_HELP = ("a data file (wide/long CSV, Parquet, NPZ, NT folder, .nc), evaluation-harness output (lm-eval "
              "--log_samples folder, Inspect AI .eval/.json logs, HELM runs) or an embedded dataset name")


def _data_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", help=_DATA_HELP)
    p.add_argument("--model", default="2pl", help="built-in spec (rasch/1pl, 2pl, 3pl, 4pl) or a spec file path [2pl]")


def _sampling(p: argparse.ArgumentParser, *, marginal_map: bool = False, extra_methods: tuple = ()) -> None:
    if marginal_map:  # fit only: map is the MAP-EM job (bayesirt.frequentist), not a method of inference.fit
        p.add_argument("--method", default="nuts", choices=(*METHODS, "map"),
                       help="nuts, advi, fullrank_advi (posterior draws), or map: marginal MAP of the items "
                            "(MAP-EM) with SEs under the spec's priors, as `mml --priors` (1PL-4PL) [nuts]")
    else:
        p.add_argument("--method", default="nuts", choices=(*extra_methods, *METHODS),
                       help="inference method" + (" (map: the items' marginal MAP, EAP abilities)" if extra_methods else "")
                            + " [%(default)s]")
    p.add_argument("--sampler", default="nutpie", choices=SAMPLERS,
                   help="NUTS implementation; numpyro and blackjax need bayesirt[jax] [nutpie]")
    p.add_argument("--draws", type=int, default=1000, help="draws per chain (ADVI: from the approximation) [1000]")
    p.add_argument("--tune", type=int, default=1000, help="tuning steps per chain [1000]")
    p.add_argument("--chains", type=int, default=4, help="chains [4]")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed, same arrays [0]")
    p.add_argument("--advi-iterations", type=int, default=50_000, help="ADVI iteration cap [50000]")


def _float32(p: argparse.ArgumentParser) -> None:
    p.add_argument("--float32", action="store_true",
                   help="store draws in posterior.nc in single precision: half the size, 7 significant digits")


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output folder (must not exist unless --force)")
    p.add_argument("--force", action="store_true", help="replace an existing output folder")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _reader_options(p: argparse.ArgumentParser) -> None:
    """How DATA is read: the score of evaluation-harness output, repeats, partial credit, empty rows."""
    g = p.add_argument_group("reading DATA")
    g.add_argument("--metric", help="lm-eval metric field or Inspect scorer [the first listed]")
    g.add_argument("--stat", help="HELM per-instance stat [exact_match]")
    g.add_argument("--filter", help="lm-eval filter, for tasks logged under several (e.g. strict-match)")
    g.add_argument("--aggregate", choices=("mean", "majority", "first"),
                   help="rule for repeated responses of one model to one item (epochs, reruns) [refuse repeats]")
    g.add_argument("--binarize", type=float, metavar="T", help="score >= T counts as correct (partial credit, "
                   "and the mean of repeats) [refuse partial credit]")
    g.add_argument("--keep-empty", action="store_true",
                   help="refuse models or items without responses instead of dropping them (they are listed)")


def _names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, e.g. rasch,2pl; got {text!r}")
    return names


def _integers(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 1,2,3; got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, e.g. 1,2,3; got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="bayesirt", description="Bayesian item response theory for auditing AI benchmarks.")
    parser.add_argument("--version", action="version", version=f"bayesirt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    f = sub.add_parser("fit", help="fit an IRT spec to response data and write posterior, tables, report, figures")
    _data_model(f)
    _sampling(f, marginal_map=True)
    f.add_argument("--advi-batch-size", type=int,
                   help="minibatch ADVI: observed cells per step (for matrices of millions of responses) [all]")
    f.add_argument("--ci", type=float, default=0.9, help="credible-interval probability of tables [0.9]")
    f.add_argument("--log-likelihood", action="store_true", help="store pointwise log-likelihood (for LOO)")
    f.add_argument("--pairs", default="adjacent", choices=("adjacent", "all"),
                   help="P(a ahead of b): for adjacent ranks in models.csv (prob_ahead_of_next), or also for every "
                        "pair of models in pairs.nc (1PL-4PL) [adjacent]")
    _float32(f)
    _output(f)

    m = sub.add_parser("mml", help="fit a spec by marginal maximum likelihood (Bock-Aitkin EM)")
    _data_model(m)
    m.add_argument("--priors", action="store_true", help="add the spec's item priors (MAP-EM)")
    m.add_argument("--no-se", action="store_true", help="skip standard errors (faster on large item banks)")
    m.add_argument("--quadrature", type=int, default=61, help="Gauss-Hermite nodes [61]")
    m.add_argument("--max-iter", type=int, default=500, help="EM iteration cap [500]")
    _output(m)

    lad = sub.add_parser("ladder", help="fit 1PL, 2PL, 3PL, 4PL by MML and compare (AIC, BIC, LRT)")
    lad.add_argument("data", help=_DATA_HELP)
    lad.add_argument("--quadrature", type=int, default=61, help="Gauss-Hermite nodes [61]")
    lad.add_argument("--max-iter", type=int, default=500, help="EM iteration cap [500]")
    _output(lad)

    mm = sub.add_parser("mirt-mml", help="item-level MIRT (D = 1..4) by marginal ML, D chosen by held-out likelihood "
                                         "over models and BIC (SAFE App. C)")
    mm.add_argument("data", help=_DATA_HELP)
    mm.add_argument("--dims", type=_integers, default=[1, 2, 3, 4], help="dimensions D to fit, each at most 4 [1,2,3,4]")
    mm.add_argument("--folds", type=int, default=5, help="cross-validation folds over models [5]")
    mm.add_argument("--seed", type=int, default=0, help="seed of the folds and of the start values [0]")
    mm.add_argument("--quadrature", type=int, help="Gauss-Hermite nodes per dimension [61, 31, 15, 9 for D = 1..4]")
    mm.add_argument("--prune", type=float, default=1e-6,
                    help="drop grid nodes whose prior weight is below this times the largest [1e-6]")
    mm.add_argument("--loading-prior", type=float, metavar="SD",
                    help="N(0, SD^2) prior on the loadings (MAP-EM; SAFE App. C used 1.5) [none: ML]")
    mm.add_argument("--rotation", default="oblimin", choices=("oblimin", "varimax", "none"),
                    help="rotation of the standardized loadings aggregated by item group [oblimin]")
    mm.add_argument("--max-iter", type=int, default=500, help="EM iteration cap [500]")
    _output(mm)

    c = sub.add_parser("check", help="fit a spec by NUTS/ADVI and by MML/MAP-EM and report their agreement")
    _data_model(c)
    _sampling(c)
    c.add_argument("--quadrature", type=int, default=61, help="Gauss-Hermite nodes of the MML fits [61]")
    c.add_argument("--threshold-sd", type=float, default=1.0, help="prior-shrinkage flag threshold [1.0]")
    _output(c)

    sh = sub.add_parser("splithalf", help="split-half retention of top discriminations, with and without priors")
    _data_model(sh)
    sh.add_argument("--splits", type=int, default=10, help="random splits of the models [10]")
    sh.add_argument("--top", type=int, default=25, help="items selected by half-one discrimination [25]")
    sh.add_argument("--seed", type=int, default=0, help="seed of the splits [0]")
    sh.add_argument("--quadrature", type=int, default=61, help="Gauss-Hermite nodes [61]")
    _output(sh)

    pp = sub.add_parser("ppc", help="fit a spec and run posterior predictive checks (item fit, score spread)")
    _data_model(pp)
    _sampling(pp)
    pp.add_argument("--ppc-draws", type=int, default=500, help="posterior draws replicated [500]")
    pp.add_argument("--alpha", type=float, default=0.05, help="flagging level of the ppp values [0.05]")
    _float32(pp)
    _output(pp)

    pr = sub.add_parser("prior-check", help="what a spec's priors imply about data (prior predictive check)")
    pr.add_argument("--model", default="2pl", help="built-in spec or a spec file path [2pl]")
    pr.add_argument("--design", help="MODELSxITEMS, e.g. 200x100 (or give --data)")
    pr.add_argument("--data", help="observed data to compare with (sets the design)")
    pr.add_argument("--draws", type=int, default=500, help="prior draws [500]")
    pr.add_argument("--seed", type=int, default=0, help="random seed [0]")
    _output(pr)

    sb = sub.add_parser("sbc", help="simulation-based calibration of a spec and an inference method")
    sb.add_argument("--model", default="2pl", help="built-in spec or a spec file path [2pl]")
    sb.add_argument("--design", default="100x40", help="MODELSxITEMS of each simulated data set [100x40]")
    sb.add_argument("--replicates", type=int, default=200, help="simulated data sets, each fitted once [200]")
    sb.add_argument("--method", default="nuts", choices=("nuts", "advi", "fullrank_advi"), help="inference method [nuts]")
    sb.add_argument("--draws", type=int, default=500, help="draws per chain (ADVI: from the approximation) [500]")
    sb.add_argument("--tune", type=int, default=500, help="tuning steps per chain [500]")
    sb.add_argument("--chains", type=int, default=2, help="chains [2]")
    sb.add_argument("--thin", type=int, help="keep every THIN-th draw per chain [10 for nuts, 1 for advi]")
    sb.add_argument("--bins", type=int, default=20, help="rank histogram bins of the uniformity tests [20]")
    sb.add_argument("--advi-iterations", type=int, default=50_000, help="ADVI iteration cap [50000]")
    sb.add_argument("--seed", type=int, default=0, help="random seed; same seed, same ranks whatever --workers [0]")
    sb.add_argument("--workers", type=int, help="worker processes (1: in this process) [one per core]")
    sb.add_argument("--scheduler", help="address of an existing Dask scheduler (instead of local workers)")
    _output(sb)

    au = sub.add_parser("audit", help="family-DIF near-tie audit of LLM rankings (NT primary analysis)")
    au.add_argument("data", help=_DATA_HELP)
    au.add_argument("--models", help="CSV of model labels: model_id and family and/or owner (replaces derived ones)")
    au.add_argument("--items", help="CSV of item labels: item_id and item_group")
    au.add_argument("--families", type=_names,
                    help="comma-separated family labels to audit, as in the data (case matters), e.g. qwen,GPT "
                         "[every label but other and ambiguous]")
    au.add_argument("--derive-families", action="store_true",
                    help="replace the data's family labels by the NT C.1 rule on the model ids (Qwen, Llama, Gemma, "
                         "Mistral/Mixtral, Phi) before the audit")
    au.add_argument("--quick", action="store_true", help="a fast look: K <= 32, 199 controls and bootstraps")
    au.add_argument("--owner-cap", type=int, default=5, help="checkpoints kept per owner and family [5]")
    au.add_argument("--min-family-size", type=int, default=20, help="smallest family kept, after the cap [20]")
    au.add_argument("--alpha", type=float, default=0.5, help="anchor fraction kept in each blueprint cell [0.5]")
    au.add_argument("--epsilon", type=float, default=0.01, help="near-tie band on the full score (0.01 = 1 pp) [0.01]")
    au.add_argument("--controls", type=int, default=1000, help="matched-random subtests per fold [1000]")
    au.add_argument("--bootstrap", type=int, default=2000, help="composition and owner bootstrap replicates [2000]")
    au.add_argument("--adjustment", default="spectral", choices=("spectral", "direct-mirt", "bayes-mirt"),
                    help="ability adjustment: NT's spectral working model, direct penalized joint MIRT (B.1), or the "
                         "PyMC MIRT posterior (ADVI; K by the spectral rule) [spectral]")
    au.add_argument("--bayes", action="store_true",
                    help="add the Bayesian layer: residual-DIF posterior carried through anchors and reversals")
    au.add_argument("--bayes-method", default="laplace",
                    choices=("laplace", "advi", "fullrank_advi", "nuts", "bootstrap"),
                    help="inference of the Bayesian layer: the residual-DIF posterior given the offsets (laplace: "
                         "per-item Gaussian at the mode; advi, fullrank_advi, nuts), or the owner-clustered Bayesian "
                         "bootstrap refitting offsets, DIF and purification per draw with K fixed (bootstrap) [laplace]")
    au.add_argument("--bayes-prior", default="ridge", choices=("ridge", "hierarchical"),
                    help="prior on the family effects: NT's ridge as N(0, 1), or a learned common scale [ridge]")
    au.add_argument("--bayes-draws", type=int, default=400,
                    help="posterior draws of the Bayesian layer per audit half [400]")
    au.add_argument("--bayes-controls", type=int, default=100,
                    help="with --bayes: random controls per posterior draw and fold (the per-draw null; with "
                         "--matched also the discrimination-matched ones), at most --controls [100]")
    au.add_argument("--bayes-ability-spec", default="2pl",
                    help="with --bayes: spec (built-in name or 1PL-4PL file) fitted to all retained models for the "
                         "near-tie leaderboard's P(a ahead of b) (near_ties.csv); none skips the leaderboard [2pl]")
    au.add_argument("--matched", action="store_true",
                    help="add the discrimination- and reliability-matched controls (NT B.2)")
    au.add_argument("--perturbations", action="store_true",
                    help="add the population perturbations (owner caps 1 and 3, lexicographic, lineage, omit a family)")
    au.add_argument("--profiles", action="store_true",
                    help="add the capability-profile matching diagnostic (NT App. G)")
    au.add_argument("--sensitivity", action="store_true",
                    help="add the score-gap threshold (0.25-5 pp) and anchor-fraction (30/50/70%%) curves")
    au.add_argument("--seed", type=int, default=0, help="analysis seed (K split, SVD, controls, bootstraps) [0]")
    au.add_argument("--workers", type=int, default=1,
                    help="local worker processes for the resampling; 1 runs it in this process [1]")
    au.add_argument("--scheduler", help="address of an existing Dask scheduler (instead of local workers)")
    _output(au)

    ac = sub.add_parser("audit-compare", help="family shifts of two audits on their exact common models (NT B.7)")
    ac.add_argument("left", help="output folder of `bayesirt audit` on the first benchmark")
    ac.add_argument("right", help="output folder of `bayesirt audit` on the second benchmark")
    ac.add_argument("--bootstrap", type=int, default=2000, help="owner-bootstrap replicates [2000]")
    ac.add_argument("--families", type=_names,
                    help="comma-separated family labels to compare, as the audits wrote them (case matters) [all]")
    ac.add_argument("--derive-families", action="store_true",
                    help="compare by the NT C.1 family labels of the model ids instead of the audits' labels")
    ac.add_argument("--seed", type=int, default=0, help="seed of the owner bootstrap [0]")
    _output(ac)

    ca = sub.add_parser("content-audit", help="blinded content-audit statistics of two annotators' labels (NT D.4)")
    ca.add_argument("labels", help="CSV of content-audit labels: two annotators x matched high-DIF/control items")
    ca.add_argument("--permutations", type=int, default=10_000,
                    help="family-direction label permutations per annotator [10000]")
    ca.add_argument("--seed", type=int, default=0, help="seed of the permutations [0]")
    _output(ca)

    cm = sub.add_parser("compare", help="compare specs or MIRT dimensions by cross-validated elpd (LOO, K-fold by model)")
    cm.add_argument("data", help=_DATA_HELP)
    which = cm.add_mutually_exclusive_group(required=True)
    which.add_argument("--models", type=_names, help="comma-separated specs, e.g. rasch,2pl,3pl,4pl")
    which.add_argument("--dims", type=_integers, help="comma-separated MIRT dimensions, e.g. 1,2,3,4")
    cm.add_argument("--mirt-spec", default="mirt", help="exploratory MIRT spec varied by --dims [mirt]")
    cm.add_argument("--unit", default="model", choices=("model", "cell"),
                    help="unit of prediction: a whole model's responses (ability integrated out) or one response [model]")
    cm.add_argument("--kfold", default="auto", choices=("auto", "always", "never"),
                    help="exact K-fold by model: when Pareto k flags > 5%% of models, always, or never [auto]")
    cm.add_argument("--folds", type=int, default=5, help="folds of the K-fold cross-validation [5]")
    cm.add_argument("--rotation", choices=("oblimin", "varimax"), help="rotate MIRT loadings in loadings_*.csv")
    cm.add_argument("--workers", type=int, help="worker processes for K-fold refits [one per core]")
    cm.add_argument("--scheduler", help="address of an existing Dask scheduler (instead of local workers)")
    _sampling(cm)
    _output(cm)

    fa = sub.add_parser("factors", help="factor structure of abilities: minres EFA, rotation, RMSEA/CFI, parallel analysis")
    fa.add_argument("inputs", nargs="+", help="one CSV of abilities (models x benchmarks), or three or more response data files")
    fa.add_argument("--n-factors", type=_integers,
                    help="factor counts to fit [1-4, as far as the number of benchmarks identifies them]")
    fa.add_argument("--rotation", default="oblimin", choices=("oblimin", "varimax", "none"), help="rotation [oblimin]")
    fa.add_argument("--bootstrap", type=int, default=500,
                    help="bootstrap resamples of the models for the loading intervals (response files; 0: none) [500]")
    fa.add_argument("--cohort", default="pairwise", choices=("pairwise", "complete"),
                    help="every model on the benchmark pairs it has, or only models with every benchmark [pairwise]")
    fa.add_argument("--polarity", action="append", default=[], metavar="BENCHMARK=-1",
                    help="declare a benchmark's polarity (+1 or -1; repeatable); others are detected [detected]")
    fa.add_argument("--parallel-iter", type=int, default=1000, help="random data sets of the parallel analysis [1000]")
    fa.add_argument("--parallel-communalities", default="minres", choices=("minres", "smc"),
                    help="reduced-matrix diagonal of the parallel analysis (SAFE: minres) [minres]")
    _sampling(fa, extra_methods=("map",))
    fa.set_defaults(method="map")  # one 2PL per benchmark file by MAP-EM (EAP abilities), SAFE's regularized MML
    _output(fa)

    inf = sub.add_parser("information", help="item and test information curves (posterior-averaged for a fit)")
    inf.add_argument("source", help="posterior.nc of a fit, an item-parameter .nc, or response data (calibrated by MML)")
    inf.add_argument("--model", default="2pl", help="spec used to calibrate response data [2pl]")
    _output(inf)

    ct = sub.add_parser("cat", help="adaptive testing on held-out models: CAT vs informed and random tests (SAFE Fig. 3)")
    ct.add_argument("data", help=_DATA_HELP)
    ct.add_argument("--budgets", type=_integers, default=[10, 25, 50, 100], help="test lengths [10,25,50,100]")
    ct.add_argument("--splits", type=int, default=20, help="random calibration/test splits of the models [20]")
    ct.add_argument("--random-subsets", type=int, default=100, help="random item subsets per budget and split [100]")
    ct.add_argument("--rule", default="fisher", choices=("fisher", "kl", "posterior"), help="CAT item selection [fisher]")
    ct.add_argument("--estimator", default="eap", choices=("eap", "map"), help="ability update [eap]")
    ct.add_argument("--seed", type=int, default=0, help="seed of splits and subsets [0]")
    ct.add_argument("--workers", type=int, help="worker processes [one per core]")
    ct.add_argument("--scheduler", help="address of an existing Dask scheduler (instead of local workers)")
    _output(ct)

    pf = sub.add_parser("personfit", help="l_z person fit with a cut-off calibrated to a false-positive rate")
    pf.add_argument("data", help=_DATA_HELP)
    pf.add_argument("--fpr", type=float, default=0.1, help="false-positive rate on the genuine cohort [0.1]")
    pf.add_argument("--statistic", default="lz", choices=("lz", "lz_star"), help="person-fit statistic [lz]")
    pf.add_argument("--posterior", help="posterior.nc of a fit: add posterior predictive person-fit p-values")
    pf.add_argument("--reference", help="a separate genuine cohort (data file) that calibrates the items and the "
                                        "cut-off; DATA's models are then scored against it")
    pf.add_argument("--seed", type=int, default=0, help="random seed [0]")
    _output(pf)

    sg = sub.add_parser("sandbag", help="simulate uniform/targeted/triggered sandbagging and detect it")
    sg.add_argument("data", help=_DATA_HELP)
    sg.add_argument("--fpr", type=float, default=0.1, help="false-positive rate of the detectors [0.1]")
    sg.add_argument("--statistic", default="lz", choices=("lz", "lz_star"), help="person-fit statistic [lz]")
    sg.add_argument("--direction", default="down", choices=("down", "up"),
                    help="down: correct answers turned wrong (under-performance); up: the reverse [down]")
    sg.add_argument("--test-length", type=int, default=40, help="items of the ability-shift test [40]")
    sg.add_argument("--reference", help="a separate genuine cohort (data file): DATA then holds real suspect runs, "
                                        "scored against it by person fit and ability shift instead of a simulation")
    sg.add_argument("--seed", type=int, default=0, help="random seed [0]")
    sg.add_argument("--workers", type=int, default=1, help="worker processes [1]")
    sg.add_argument("--scheduler", help="address of an existing Dask scheduler (instead of local workers)")
    _output(sg)

    fp = sub.add_parser("fingerprint", help="identify endpoints by response disagreement with reference responses")
    fp.add_argument("reference", help="reference responses (" + _DATA_HELP + ")")
    fp.add_argument("query", help="query responses on the same items")
    fp.add_argument("--identities", help="CSV model_id,identity marking repeated collections of one model")
    fp.add_argument("--alpha", type=float, default=0.05, help="level of the self-disagreement null [0.05]")
    fp.add_argument("--resamples", type=int, default=50, help="resamples of the null without repeats [50]")
    fp.add_argument("--seed", type=int, default=0, help="random seed [0]")
    _output(fp)

    sub.add_parser("datasets", help="list the embedded datasets")

    r = sub.add_parser("run", help="run a declared analysis (analyses/*.toml)")
    r.add_argument("analysis", help="path of the analysis spec")
    r.add_argument("--force", action="store_true", help="replace an existing output folder")
    r.add_argument("--resume", action="store_true",
                   help="rerun only the steps that are missing or failed in the output folder, with its recorded settings")
    r.add_argument("--no-progress", action="store_true", help="hide progress bars")
    for command in sub.choices.values():  # every command that reads DATA takes the reading options
        if any(action.dest == "data" for action in command._actions):
            _reader_options(command)
    return parser
