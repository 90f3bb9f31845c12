"""Old spellings of renamed options (issue 41 item 3): accepted for one release with a FutureWarning that
names the old and the new spelling and points at the caller's line; the value reaches the new option."""

import warnings

import pytest

from bayesirt.audit.engine.result import AuditConfig
from bayesirt.cli.parser import build_parser
from bayesirt.errors import ConfigError
from bayesirt.inference.fitting import sample_model
from bayesirt.jobs.audit import run_audit_job
from bayesirt.jobs.analysis import load_analysis
from bayesirt.utils.options import check_options, renamed_of, renamed_options


def test_audit_config_takes_the_old_field_names_with_a_warning():
    with pytest.warns(FutureWarning, match="option 'alpha' is now 'anchor_fraction'"):
        config = AuditConfig(alpha=0.3)
    assert config.anchor_fraction == 0.3
    with pytest.warns(FutureWarning, match="option 'bootstrap' is now 'composition_bootstrap'"):
        config = AuditConfig(bootstrap=9)
    assert config.composition_bootstrap == 9
    assert AuditConfig(quick=True, composition_bootstrap=500).resolved().composition_bootstrap == 199


def test_the_warning_points_at_the_callers_line():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        AuditConfig(alpha=0.3)
    assert [w.filename for w in seen] == [__file__]


def test_audit_job_inherits_the_renames_of_its_config():
    assert renamed_of(run_audit_job) == {"alpha": "anchor_fraction", "bootstrap": "composition_bootstrap"}


def test_old_flag_reaches_the_new_option_and_warns(capsys):
    args = build_parser(("audit",)).parse_args(["audit", "data.csv", "--out", "o", "--bootstrap", "7"])
    assert args.composition_bootstrap == 7
    assert "--bootstrap is now --composition-bootstrap" in capsys.readouterr().err


def test_old_flag_is_checked_like_the_new_one():
    with pytest.raises(ConfigError, match="'composition_bootstrap' parameter of audit must be a non-negative integer"):
        build_parser(("audit",)).parse_args(["audit", "data.csv", "--out", "o", "--bootstrap", "-1"])


def test_sample_model_map_is_now_joint_map():
    with pytest.warns(FutureWarning, match="method='map' is now 'joint_map'"):
        checked = check_options(sample_model, {"method": "map"}, caller="sample_model")
    assert checked["method"] == "joint_map"


def test_analysis_file_takes_the_old_key_with_a_warning(tmp_path):
    path = tmp_path / "audit.toml"
    path.write_text('[analysis]\nkind = "audit"\ndata = "bench.csv"\nout = "out"\n\n[audit]\nalpha = 0.3\n'
                    'bootstrap = 0\n')
    with pytest.warns(FutureWarning, match=r"\[audit\] audit: option 'alpha' is now 'anchor_fraction'"):
        spec = load_analysis(path)
    assert spec["options"]["anchor_fraction"] == 0.3 and spec["options"]["composition_bootstrap"] == 0


def test_one_name_per_meaning_select_and_sandbag():
    """``select --method`` chose items, not an inference method: it is ``--selection-rule``; ``sandbag --target``
    named an item group, not ``cat``'s full-score target: it is ``--target-group``. The old flags still work."""
    from bayesirt.jobs.bank import run_select_job
    from bayesirt.jobs.safety import run_sandbag_job

    assert renamed_of(run_select_job) == {"method": "selection_rule"}
    assert renamed_of(run_sandbag_job) == {"target": "target_group"}
    with pytest.warns(FutureWarning, match="option 'method' is now 'selection_rule'"):
        given = renamed_options(run_select_job, {"method": "score"}, caller="select")
    assert given == {"selection_rule": "score"}
    args = build_parser(("select", "sandbag")).parse_args(["select", "bank.nc", "--budget", "5", "--method", "extended",
                                                           "--out", "o"])
    assert args.selection_rule == "extended"
    args = build_parser(("sandbag",)).parse_args(["sandbag", "data.csv", "--target", "strongest", "--out", "o"])
    assert args.target_group == "strongest"
    with pytest.raises(ConfigError, match="'selection_rule' parameter of select must be one of"):
        build_parser(("select",)).parse_args(["select", "bank.nc", "--budget", "5", "--method", "nope", "--out", "o"])
