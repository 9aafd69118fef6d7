"""The `termagent` console command. Each sub-command lives next to the code it drives and is
imported lazily, so `termagent --help` stays fast and a broken optional stack (e.g. no torch)
only breaks the commands that need it."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "image": "termagent.sandbox.cli:image",
    "tasks": "termagent.tasks.cli:tasks",
    "agent": "termagent.agent.cli:agent",
    "datasets": "termagent.datasets.cli:datasets",
    "curate": "termagent.curate.cli:curate",
    "serve": "termagent.serve:serve",
    "eval": "termagent.evaluate.cli:eval_group",
    "report": "termagent.report.cli:report",
}
# group name -> commands added to that group from a package above it (`tasks check` runs containers: the
# sandbox's; the tasks package stays below the sandbox)
ADDED: dict[str, list[str]] = {"tasks": ["termagent.sandbox.check:check"]}


def _load(target: str):
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        command = _load(target)
        for added in ADDED.get(name, []):
            command.add_command(_load(added))
        return command


@click.group(cls=LazyGroup)
@click.version_option(package_name="termagent")
def main() -> None:
    """termagent: terminal agents in Docker sandboxes — tasks, agent, training, evaluation."""


if __name__ == "__main__":
    main()
