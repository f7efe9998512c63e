"""sunk.slurmconf.option_types without Slurm: each type takes its own good examples and refuses
its bad ones, with a message that names the key and the form Slurm reads. (The slurm tier
checks the same examples against Slurm's parser.)"""

from __future__ import annotations

import pytest

from sunk.slurmconf.option_types import PARTITION, SLURM_CONF, value_problem

TABLES = {"slurm.conf": SLURM_CONF, "partition": PARTITION}


@pytest.mark.parametrize("table", TABLES)
def test_each_type_takes_its_good_examples_and_refuses_its_bad_ones(table: str):
    options = TABLES[table]
    for key, option in options.items():
        assert option.good and option.bad, key
        for value in option.good:
            assert value_problem(options, key, value) is None, (key, value)
        for value in option.bad:
            assert value_problem(options, key, value), (key, value)


def test_the_message_names_the_key_the_value_and_the_form():
    problem = value_problem(PARTITION, "MaxTime", "10 Nodes=ALL")
    assert problem == (
        "`MaxTime=10 Nodes=ALL` is not a time: Slurm reads MaxTime as a time (MM, MM:SS, "
        "HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED)"
    )
    assert value_problem(SLURM_CONF, "messagetimeout", "65536") == (
        "`messagetimeout=65536` is greater than 65535: Slurm reads messagetimeout as a whole "
        "number from 0 to 65535"
    )
    assert value_problem(SLURM_CONF, "SchedulerParameters", "anything") is None  # not typed
