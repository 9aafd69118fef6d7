"""The `sandbox:` section of params.yaml, typed: the base image recipe and the runner's knobs.

Stage scripts and the CLI build it with `termagent.params` (`read_sections(..., sandbox=SandboxParams)`);
the library itself only ever sees the `BaseImageRecipe` and `SandboxConfig` made from it. Every default
is the one of `BaseImageRecipe` / `SandboxConfig`, never restated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from termagent.sandbox.image import BaseImageRecipe
from termagent.sandbox.offline import OfflineConfig
from termagent.sandbox.pool import SandboxConfig


@dataclass
class SandboxParams:
    recipe: Literal["debootstrap", "dockerfile", "auto"] = BaseImageRecipe.recipe
    suite: str = BaseImageRecipe.suite
    image_name: str = BaseImageRecipe.name
    concurrency: int = SandboxConfig.concurrency
    pids_limit: int = SandboxConfig.pids_limit
    output_limit_bytes: int = SandboxConfig.output_limit_bytes
    image_policy: Literal["alias-first", "pull-first", "never"] = SandboxConfig.image_policy  # type: ignore[assignment]
    image_aliases: dict[str, str] = field(default_factory=lambda: dict(SandboxConfig().image_aliases))
    warm_pool: int = SandboxConfig.warm_pool
    background_remove: bool = SandboxConfig.background_remove
    retries: int = SandboxConfig.retries
    # Offline stand-ins for public images (Python flavours, host trust, uv): see termagent/sandbox/offline.py
    offline: OfflineConfig = field(default_factory=OfflineConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.retries, int) or isinstance(self.retries, bool) or self.retries < 0:
            raise ValueError(f"sandbox.retries must be an integer >= 0, got {self.retries!r}")

    def base_recipe(self) -> BaseImageRecipe:
        """The recipe; `auto` is resolved on this host (termagent.sandbox.image.resolve_recipe: the Docker engine
        and the apt sources are asked), so the tag is always a real recipe's."""
        recipe = BaseImageRecipe(name=self.image_name, recipe=self.recipe, suite=self.suite)
        if recipe.recipe == "auto":
            from termagent.sandbox.image import resolve_recipe

            recipe, _ = resolve_recipe(recipe)
        return recipe

    def sandbox_config(self, base_image: str | None = None) -> SandboxConfig:
        """The runner's config; `base_image` defaults to the recipe's hash tag."""
        return SandboxConfig(base_image=base_image or self.base_recipe().tag, concurrency=self.concurrency,
                             pids_limit=self.pids_limit, output_limit_bytes=self.output_limit_bytes,
                             image_policy=self.image_policy, image_aliases=dict(self.image_aliases),
                             warm_pool=self.warm_pool, background_remove=self.background_remove,
                             retries=self.retries, offline=_offline(self.offline, self.suite))


def _offline(config: OfflineConfig, suite: str) -> OfflineConfig:
    """The base suite is the recipe's own (`sandbox.suite`)."""
    return dataclasses.replace(config, base_suite=suite)
