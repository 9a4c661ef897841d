"""The workers' agreement on settings: under several workers every one trains with the chief's.

The chief alone reads the run directory (a resumed run's recorded settings) and the files that
settings name ([`fcn.training.loop`][] says why); [`chief_settings`][] sends the chief's
settings to every worker by collective ([`fcn.training.distribute.sync_text`][]), and a
setting a worker was given that differs from the chief's makes every worker refuse, naming
it. [`fcn.train`][] calls it once, after the chief has read its run.
"""

from __future__ import annotations

import json
from typing import Any

import tensorflow as tf

from fcn.classes import read_class_names
from fcn.training import distribute
from fcn.training.config import TrainConfig, describe, differences

READ_BY_THE_CHIEF_ALONE: tuple[str, ...] = ("weights", "init_from")
"""Settings naming files that the chief alone reads ([`fcn.training.loop`][]): the other
workers' values are not compared with the chief's, since a path may differ between machines."""


def chief_settings(
    strategy: tf.distribute.Strategy, chief: bool, config: TrainConfig, given: dict[str, Any]
) -> TrainConfig:
    """Every worker's config under several workers: the chief's settings (a resumed run's
    included: the others need not see its run directory; its class names as names, not as the
    file it read them from), with this worker's ``run_dir``, ``resume`` and ``verbose``. A
    setting this worker was ``given`` that differs from the chief's makes every worker refuse,
    naming it (else their gradients would mix other batches, rates or models without a
    word).

    Examples:
        >>> strategy = tf.distribute.get_strategy()  # one worker: the chief, agreeing with itself
        >>> chief_settings(strategy, True, TrainConfig(epochs=2), {"epochs": 2}).epochs
        2
    """
    sent = ""
    with distribute.stop_together(strategy):  # the chief's class_names file: unreadable?
        if chief:
            sent = json.dumps(_with_names(config.to_json()))
    settings = json.loads(distribute.sync_text(strategy, sent))
    problem, mine = "", {}
    if not chief:
        mine = {k: v for k, v in given.items() if k not in READ_BY_THE_CHIEF_ALONE}
        try:
            mine = _with_names(mine)
        except (OSError, ValueError) as error:  # its class_names file, unreadable here
            problem = f"class_names: {error}"
        else:
            problem = describe(differences(settings, mine, names=list(settings)), "the chief")
    others = distribute.count_workers(strategy, bool(problem))
    if others:
        raise ValueError(
            f"{others} of {distribute.cluster_size()} workers were given other settings than "
            f"the chief's ({f'this one: {problem}' if problem else 'not the chief'}): give "
            "every worker the same settings, or only the data and run_dir (the others take the "
            "chief's); nothing was trained"
        )
    return config if chief else config.resumed(settings, mine)


def _with_names(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with ``class_names``, where it is set, as the list of names it gives (a
    file's path read here)."""
    if settings.get("class_names") is None:
        return settings
    return {**settings, "class_names": list(read_class_names(settings["class_names"]))}
