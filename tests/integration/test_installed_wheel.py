"""The wheel works where no checkout is: built from a copy of the tree, installed into a fresh
venv in a temporary folder, and run from there. The venv sees the project's installed
dependencies through a ``.pth`` line (nothing is downloaded) but not the tree itself, so
``flowledger n8n setup`` finds its templates only if the wheel carries them."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

import flowledger
from tests.support.fakes.n8n_setup import KEY, FakeN8n, serving
from tests.support.wheel import ROOT, build_wheel

pytestmark = pytest.mark.skipif(ROOT.name == "mutants", reason="a mutated copy of the tree")


def _venv_with_the_wheel(tmp_path: Path) -> Path:
    """A venv in ``tmp_path/venv`` holding the wheel and seeing the project's dependencies;
    returns its ``bin``."""
    wheel = build_wheel(tmp_path / "build")
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    paths = {"base": str(home), "platbase": str(home)}
    site = Path(sysconfig.get_path("purelib", vars=paths))
    # A plain path line: the project's site-packages, without processing its .pth files (the
    # editable install of this tree is one of them).
    (site / "project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    python = home / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return home / "bin"


def test_the_installed_wheel_runs_outside_the_tree(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    bin_dir = _venv_with_the_wheel(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWLEDGER_", "PYTHON"))}
    env["TEST_N8N_API_KEY"] = KEY

    def run(*args: str) -> str:
        done = subprocess.run(
            [str(bin_dir / "flowledger"), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"flowledger {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import flowledger; print(flowledger.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where
    assert not Path(where).is_relative_to(ROOT)

    assert run("--version") == f"flowledger {flowledger.__version__}\n"
    run("init", "--db", "ledger.db")
    assert "demo ledger at demo.db" in run("demo", "--db", "demo.db")
    assert "--with-example" in run("n8n", "setup", "--help")

    fake = FakeN8n()
    with serving(fake) as url:
        (work / "flowledger.toml").write_text(
            f'[[sources]]\nname = "prod-n8n"\nkind = "n8n"\nbase_url = "{url}"\n'
            'api_key_env = "TEST_N8N_API_KEY"\n'
        )
        out = run("n8n", "setup", "--source", "prod-n8n", "--db", "ledger.db", "--with-example")
    # Both templates on the node were read from the installed package and imported; only the
    # error workflow is activated.
    made = {w["name"]: w["active"] for w in fake.workflows.values()}
    assert made == {
        "flowledger: report failed executions (Flowledger node)": True,
        "Send invoice (guarded by the Flowledger node)": False,
    }
    assert [c["type"] for c in fake.credentials] == ["flowledgerApi"]
    assert f"n8n at {url}: Flowledger node installed" in out
    assert "report failed executions (Flowledger node)" in out, out
