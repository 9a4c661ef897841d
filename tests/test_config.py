"""``TrainConfig``: one home per setting. Each numeric field holds its range, a recipe is a set of
defaults for the fields marked as the recipe's, and runs recorded with these field names resume."""

from __future__ import annotations

import dataclasses
from typing import get_args, get_type_hints

import pytest

from fcn.training.config import Range, TrainConfig
from fcn.training.recipes import RECIPES, Recipe


def test_every_numeric_field_holds_its_range():
    hints = get_type_hints(TrainConfig)
    numeric = {
        f.name for f in dataclasses.fields(TrainConfig)
        if {int, float} & set(get_args(hints[f.name]) or (hints[f.name],))
        and str not in get_args(hints[f.name])
    }  # fmt: skip
    ranged = {f.name for f in dataclasses.fields(TrainConfig) if "range" in f.metadata}
    assert numeric == ranged
    assert all(isinstance(f.metadata.get("range", Range(0, 0, "")), Range)
               for f in dataclasses.fields(TrainConfig))  # fmt: skip


def test_a_recipe_gives_defaults_for_the_fields_marked_as_the_recipes():
    marked = {f.name for f in dataclasses.fields(TrainConfig) if f.metadata.get("recipe")}
    assert marked == {
        "crop_size", "batch_size", "learning_rate", "augment", "frozen_blocks", "body_rate"
    }  # fmt: skip
    assert marked < {f.name for f in dataclasses.fields(Recipe)}
    for name, recipe in RECIPES.items():
        values = {field: getattr(recipe, field) for field in marked}
        TrainConfig(recipe=name, **values)  # each value within its field's range
        assert TrainConfig(recipe=name).effective_recipe() == recipe
        assert TrainConfig(recipe=name, **values).effective_recipe() == recipe


def test_the_config_replaces_the_recipes_values_it_sets_and_keeps_the_others():
    recipe = TrainConfig(crop_size=64, learning_rate=0.5, augment=False).effective_recipe(3)
    practical = RECIPES["practical"]
    assert (recipe.crop_size, recipe.learning_rate, recipe.augment) == (64, 0.5, False)
    assert recipe.batch_size == 3 * practical.batch_size  # per replica without its own
    assert (recipe.momentum, recipe.poly_power, recipe.frozen_blocks) == (
        practical.momentum, practical.poly_power, practical.frozen_blocks
    )  # fmt: skip
    assert TrainConfig(frozen_blocks=0, batch_size=5).effective_recipe(3).frozen_blocks == 0
    assert TrainConfig(frozen_blocks=0, batch_size=5).effective_recipe(3).batch_size == 5


RECORDED = {
    "variant": "fcn8s", "weights": "imagenet", "width": 0.25, "dropout": 0.5,
    "num_classes": None, "class_names": ["a", "b"], "recipe": "paper", "epochs": 50,
    "steps_per_epoch": None, "crop_size": 256, "batch_size": 4, "learning_rate": 0.01,
    "augment": False, "frozen_blocks": 3, "accumulate": 1, "mixed_precision": None, "seed": 0,
    "val_every": 1, "val_max_pixels": None, "init_from": None,
}  # fmt: skip
"""The settings ``state.json`` recorded before the recipe's defaults and the ranges moved into
the fields (``TrainConfig.to_json`` of that day, copied as written)."""


def test_a_run_recorded_with_these_field_names_resumes_with_its_settings():
    config = TrainConfig(resume=True, run_dir="runs/x").resumed(RECORDED, {"epochs": 60})
    as_it_ran = {"unfreeze": "never", "body_rate": 1.0}
    assert config.to_json() == {**RECORDED, "epochs": 60, **as_it_ran}
    assert (config.run_dir, config.resume) == ("runs/x", True)
    recipe = config.effective_recipe()
    assert (recipe.crop_size, recipe.batch_size, recipe.learning_rate) == (256, 4, 0.01)
    assert (recipe.augment, recipe.frozen_blocks, recipe.momentum) == (False, 3, 0.99)
    with pytest.raises(ValueError, match="frozen_blocks 2 differs from the run's 3"):
        TrainConfig(resume=True).resumed(RECORDED, {"frozen_blocks": 2})
