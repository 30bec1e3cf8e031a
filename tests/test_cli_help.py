"""Every option of every `grader` subcommand says what it does in `--help` (`--port` once had
nothing): walk the real parser, the one `grader` runs (service/cli.py's composition of
grader/cli.py's commands with the service's)."""
from __future__ import annotations

import argparse

from grader import cli as grader_cli
from service import cli as service_cli


def walk(parser: argparse.ArgumentParser, path: str):
    """(command path, action) for every option and argument, subcommands included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def without_help(parser: argparse.ArgumentParser) -> list[str]:
    return [f"{path} {'/'.join(action.option_strings) or action.dest}"
            for path, action in walk(parser, "grader") if not action.help or action.help == argparse.SUPPRESS]


def test_every_option_of_every_command_has_help():
    parser = grader_cli.build_parser(service_cli.COMMANDS)
    commands = {path for path, _ in walk(parser, "grader")}
    assert {"grader serve", "grader grade", "grader worker", "grader gradescope build"} <= commands
    assert without_help(parser) == []


def test_the_walk_finds_an_option_without_help():
    """The check itself: an option with no help is named, with its command."""
    parser = argparse.ArgumentParser(prog="grader")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run it")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="grades at once")
    assert without_help(parser) == ["grader serve --port"]
