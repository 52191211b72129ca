"""Every publish surface declares what the publisher and the CLI need of it: its options (which
PublishOptions takes on and the publish command offers as flags), the switch that turns it on,
the permission it needs and the outputs it sets."""

from __future__ import annotations

import argparse
import dataclasses

from ditox_ci.__main__ import build_parser
from ditox_ci.github.publisher import PublishOptions, in_order
from ditox_ci.github.surface import SURFACES, surface_options


def _publish_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for action in sub.choices["publish"]._actions for flag in action.option_strings}


def test_the_surfaces_run_comment_first_then_check_then_issues() -> None:
    assert [name for name, _ in in_order()] == ["comment", "check", "issues"]
    assert set(SURFACES) == {"comment", "check", "issues"}


def test_each_surface_s_options_are_publish_options_and_flags_of_the_publish_command() -> None:
    flags = _publish_flags()
    publish_fields = {field.name for field in dataclasses.fields(PublishOptions)}
    for name, surface in SURFACES.items():
        assert issubclass(PublishOptions, surface.options), name
        own = {field.name for field in dataclasses.fields(surface.options)}
        assert surface.switch in own and own <= publish_fields, name
        assert surface.step and ": write" in surface.permission, name
    for option in surface_options():
        if "help" in option.metadata:
            assert "--" + option.name.replace("_", "-") in flags


def test_a_surface_is_turned_off_by_the_no_flag_of_its_switch() -> None:
    flags = _publish_flags()
    for name, surface in SURFACES.items():
        turn_off = f"--no-{surface.switch.replace('_', '-')}"
        assert turn_off in flags, name
