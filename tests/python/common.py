"""Shared by the Python tests: the demo model, the CLI, the library."""

import json
import os
import subprocess
from typing import Any, Dict, List

MODEL = "models/demo"
CLI = os.environ.get("OCTET_CLI", "build/octet")


def cli_generate(args: List[str]) -> Dict[str, Any]:
    """`octet generate --model models/demo --json ARGS` as a dict."""
    r = subprocess.run(
        [CLI, "generate", "--model", MODEL, "--json"] + args,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(r.stdout)


def cli_json(cmd: str, args: List[str]) -> Any:
    """`octet CMD --model models/demo --json ARGS` as parsed JSON."""
    r = subprocess.run(
        [CLI, cmd, "--model", MODEL, "--json"] + args, capture_output=True, text=True, check=True
    )
    return json.loads(r.stdout)


def rss_bytes() -> int:
    """Resident set size of this process (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
