"""The one message form of every settings check (bayesirt.utils.validation) and the file-option checks
generated from declarations (bayesirt.utils.options.Option.check)."""

import pytest

from bayesirt.errors import BayesIRTError, ConfigError, DataError, SpecError
from bayesirt.utils.options import Option, option_table
from bayesirt.utils.validation import check_bool, check_choice, check_int, check_number, check_probability


def test_messages_name_the_parameter_the_function_and_the_value():
    with pytest.raises(ConfigError, match=r"^The 'method' parameter of fit must be one of \{'nuts', 'advi'\}; "
                                          r"got 'nut' \(did you mean 'nuts'\?\)\.$"):
        check_choice("nut", ("nuts", "advi"), name="method", caller="fit")
    with pytest.raises(ConfigError, match=r"The 'draws' parameter of fit must be a positive integer; got True"):
        check_int(True, name="draws", caller="fit", low=1)  # a bool is not an integer
    with pytest.raises(ConfigError, match=r"must be an integer in \[1, 4\]; got 5\.$"):
        check_int(5, name="k", caller="static_test", low=1, high=4)
    with pytest.raises(ConfigError, match=r"must be a number in \(0, 1\); got 1\.0\.$"):
        check_probability(1.0, name="fpr", caller="x")
    with pytest.raises(ConfigError, match=r"must be a number > 0; got nan\.$"):
        check_number(float("nan"), name="sd", caller="x", low=0, low_open=True)
    with pytest.raises(ConfigError, match="must be True or False"):
        check_bool("yes", name="quick", caller="x")


def test_checks_return_plain_values_and_accept_the_bounds():
    assert check_int(3, name="k", caller="x", low=1, high=3) == 3 and check_int(None, name="k", caller="x",
                                                                                 optional=True) is None
    assert check_probability(1.0, name="p", caller="x", closed=True) == 1.0
    assert check_choice("advi", ("nuts", "advi"), name="m", caller="x") == "advi"


def test_error_classes_say_what_is_wrong():
    assert SpecError is ConfigError and issubclass(ConfigError, BayesIRTError)
    assert not issubclass(ConfigError, DataError) and not issubclass(DataError, ConfigError)


def test_file_options_are_checked_against_their_declaration():
    table = option_table(budgets=Option((10, 25), "test lengths", low=1), fpr=Option(0.1, "rate", low=0, high=1,
                                                                                      open=True),
                         rule=Option("fisher", "selection", choices=("fisher", "kl")),
                         eps=Option(0.01, "band", low=0, high=1, open="low"))
    assert table["budgets"].check([5, 10], caller="cat", where="f: [cat]") == (5, 10)  # lists become tuples
    assert table["fpr"].check(0.2, caller="x") == 0.2 and table["eps"].check(1, caller="x") == 1.0
    with pytest.raises(ConfigError, match=r"^f: \[cat\] The 'budgets' parameter of cat must be a list of positive "
                                          r"integers; got \[5, 0\]\.$"):
        table["budgets"].check([5, 0], caller="cat", where="f: [cat]")
    with pytest.raises(ConfigError, match=r"The 'fpr' parameter of x must be a number in \(0, 1\); got 1\.$"):
        table["fpr"].check(1, caller="x")
    with pytest.raises(ConfigError, match=r"The 'eps' parameter of x must be a number in \(0, 1\]; got 0\.$"):
        table["eps"].check(0, caller="x")
    with pytest.raises(ConfigError, match=r"'rule' parameter of x must be one of \{'fisher', 'kl'\}; got 'fishr' "
                                          r"\(did you mean 'fisher'\?\)\.$"):
        table["rule"].check("fishr", caller="x")
