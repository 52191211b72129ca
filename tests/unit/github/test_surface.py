"""Every publish surface declares what the publisher and the CLI need of it: its options (which
PublishOptions takes on and the publish command offers as flags), the switch that turns it on,
the permission it needs and the outputs it sets."""

from __future__ import annotations

import dataclasses

from ditox_ci.__main__ import build_parser
from ditox_ci.cli.publish import PublishSettings
from ditox_ci.github.publisher import PublishOptions, in_order
from ditox_ci.github.surface import SURFACES, surface_options
from ditox_ci.options import resolve
from tests.helpers import option_names


def test_the_surfaces_run_comment_first_then_check_then_issues() -> None:
    assert [name for name, _ in in_order()] == ["comment", "check", "issues"]
    assert set(SURFACES) == {"comment", "check", "issues"}


def test_each_surface_s_options_are_publish_options() -> None:
    for name, surface in SURFACES.items():
        assert issubclass(PublishOptions, surface.options), name
        assert surface.switch in {field.name for field in dataclasses.fields(surface.options)}, name


def test_the_surfaces_flags_reach_the_publish_settings_with_their_types() -> None:
    argv = ["publish", "--report", "r.json", "--max-annotations", "3", "--no-check", "--check-name", "gate"]
    argv += ["--close-fixed", "--max-new-issues", "2", "--comment-key", "nightly", "--no-comment"]
    args = build_parser().parse_args(argv)
    flags = {k: v for k, v in vars(args).items() if k not in ("run", "config", "debug", "command")}
    settings = resolve(PublishSettings, flags=flags)

    assert (settings.max_annotations, settings.max_new_issues) == (3, 2)
    assert (settings.check, settings.check_name, settings.comment, settings.comment_key) == (
        False,
        "gate",
        False,
        "nightly",
    )
    assert settings.close_fixed is True
    # the surface options not given keep their defaults
    untouched = [option for option in surface_options() if flags.get(option.name) is None]
    assert [option.name for option in untouched] == ["file_issues", "bot_label"]
    assert all(getattr(settings, option.name) == option.default for option in untouched)


def test_a_surface_is_turned_off_by_the_no_flag_of_its_switch() -> None:
    flags = set(option_names("publish"))
    for name, surface in SURFACES.items():
        turn_off = f"--no-{surface.switch.replace('_', '-')}"
        assert turn_off in flags, name
