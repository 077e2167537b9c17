"""``kindling init DIR`` writes a project of the user's own: kindling's own template and layer
Makefile, a worker with a tasks module, eager-mode tests and a Makefile; it never replaces a
file already there, and ``--upgrade`` rewrites only the files a release owns, with their diff."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kindling.tools import cli, scaffold

ROOT = Path(__file__).resolve().parents[2]

PROJECT = [
    ".gitignore", "Makefile", "README.md", "functions/worker/Makefile", "functions/worker/app.py",
    "functions/worker/tasks.py", "layers/kindling/Makefile", "template.yaml", "tests/conftest.py",
    "tests/test_tasks.py",
]


def _init(directory: Path, *flags: str) -> int:
    return cli.main(["init", str(directory), *flags])


def _tree(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def test_init_writes_the_projects_files_into_a_new_directory(tmp_path, capsys):
    assert _init(tmp_path / "jobs") == 0
    assert _tree(tmp_path / "jobs") == PROJECT
    assert "wrote template.yaml" in capsys.readouterr().out


@pytest.mark.parametrize("rel, source", [
    ("template.yaml", "template.yaml"),
    ("layers/kindling/Makefile", "layers/kindling/Makefile"),
    ("functions/worker/Makefile", "functions/worker/Makefile"),
])
def test_the_template_and_build_files_are_this_repositorys_own(tmp_path, rel, source):
    """One template, one layer build: what a project deploys is what this repository's tests deploy."""
    _init(tmp_path)
    assert (tmp_path / rel).read_bytes() == (ROOT / source).read_bytes()


def test_the_worker_is_the_three_line_handler_over_the_tasks_module(tmp_path):
    _init(tmp_path)
    import ast

    body = ast.parse((tmp_path / "functions/worker/app.py").read_text()).body
    code = [ast.unparse(node) for node in body if not isinstance(node, ast.Expr)]  # not the docstring
    assert code == ["import tasks", "from kindling.triggers.sqs.handler import LambdaWorker",
                    "handler = LambdaWorker()"]
    for rel in PROJECT:
        if rel.endswith(".py"):
            compile((tmp_path / rel).read_text(), rel, "exec")


def test_the_layer_makefile_builds_from_the_installed_package_not_a_source_tree(tmp_path):
    """With no kindling/ beside it, the layer's Makefile takes the package $(PYTHON) imports."""
    _init(tmp_path)
    layer = tmp_path / "layers/kindling"
    assert sorted(p.name for p in layer.iterdir()) == ["Makefile"]
    out = subprocess.run(["make", "-s", "-C", str(layer), "-n", "build-KindlingLayer", f"PYTHON={sys.executable}",
                          "ARTIFACTS_DIR=/nonexistent"], capture_output=True, text=True, check=True, timeout=60).stdout
    import kindling

    package = Path(kindling.__file__).parent
    assert f'"{package}/tools/layerfiles.py" "{package}" "/nonexistent/python"' in out


def _layer_build(layer: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(layer), "-n", "build-KindlingLayer", f"PYTHON={sys.executable}",
                           "ARTIFACTS_DIR=/nonexistent", *args], capture_output=True, text=True)


@pytest.mark.parametrize("arch, platform", [("x86_64", "manylinux2014_x86_64"), ("arm64", "manylinux2014_aarch64")])
def test_the_layer_takes_orjson_built_for_the_templates_architecture(tmp_path, arch, platform):
    """ARCH is the template's Architecture (Lambda's names); a wheel's platform tag names the
    machine as Linux does (aarch64 for arm64)."""
    _init(tmp_path)
    done = _layer_build(tmp_path / "layers/kindling", f"ARCH={arch}")
    assert done.returncode == 0, done.stderr
    assert f"--platform {platform} " in done.stdout


def test_the_layer_refuses_an_architecture_lambda_does_not_have(tmp_path):
    _init(tmp_path)
    done = _layer_build(tmp_path / "layers/kindling", "ARCH=aarch64")
    assert done.returncode != 0
    assert "ARCH=aarch64" in done.stdout + done.stderr


def test_the_scaffolds_eager_tests_pass_as_written(tmp_path):
    """Through kindling's pytest plugin (kindling_eager). The test on moto opens sockets: it
    runs in tests/service/test_scaffold_tests.py."""
    _init(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", "--deselect",
                           "tests/test_tasks.py::test_the_worker_runs_the_tasks_from_the_queue"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed, 1 deselected" in done.stdout


def test_init_refuses_a_non_empty_directory_and_writes_nothing(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="not empty"):
        _init(tmp_path)
    assert _tree(tmp_path) == ["notes.txt"]


def test_init_force_adds_the_missing_files_and_keeps_every_file_already_there(tmp_path, capsys):
    (tmp_path / "functions/worker").mkdir(parents=True)
    (tmp_path / "functions/worker/tasks.py").write_text("# my tasks\n")
    (tmp_path / "Makefile").write_text("all:\n")
    assert _init(tmp_path, "--force") == 0
    assert _tree(tmp_path) == PROJECT
    assert (tmp_path / "functions/worker/tasks.py").read_text() == "# my tasks\n"
    assert (tmp_path / "Makefile").read_text() == "all:\n"
    out = capsys.readouterr().out
    assert "kept  Makefile" in out and "kept  functions/worker/tasks.py" in out


def test_upgrade_rewrites_only_the_files_a_release_owns_and_prints_their_diff(tmp_path, capsys):
    _init(tmp_path)
    template = tmp_path / "template.yaml"
    template.write_text(template.read_text().replace("Default: 512", "Default: 999"))
    (tmp_path / "functions/worker/tasks.py").write_text("# my tasks\n")
    capsys.readouterr()
    assert _init(tmp_path, "--upgrade") == 0
    out = capsys.readouterr().out
    assert "--- a/template.yaml" in out and "-    Default: 999" in out and "+    Default: 512" in out
    assert template.read_bytes() == (ROOT / "template.yaml").read_bytes()
    assert (tmp_path / "functions/worker/tasks.py").read_text() == "# my tasks\n"
    assert "layers/kindling/Makefile" not in out  # unchanged: no diff, not rewritten


def test_upgrade_of_an_up_to_date_project_changes_nothing(tmp_path, capsys):
    _init(tmp_path)
    capsys.readouterr()
    assert scaffold.upgrade(tmp_path) == {}


def test_upgrade_refuses_a_directory_that_is_not_a_project(tmp_path):
    with pytest.raises(SystemExit, match="no template.yaml"):
        _init(tmp_path, "--upgrade")
    assert _tree(tmp_path) == []


def test_only_the_init_command_loads_the_scaffold():
    probe = ("import sys, kindling.tools.cli as c; c.parser(); assert 'kindling.tools.scaffold' not in sys.modules; "
             "c.parser('worker'); assert 'kindling.tools.scaffold' not in sys.modules")
    subprocess.run([sys.executable, "-c", probe], check=True)


def _function_build(function: Path, *args: str) -> subprocess.CompletedProcess:
    (function / "requirements.txt").write_text("orjson\n")
    return subprocess.run(["make", "-s", "-C", str(function), "-n", "build-WorkerFunction", f"PYTHON={sys.executable}",
                           "ARTIFACTS_DIR=/nonexistent", *args], capture_output=True, text=True)


@pytest.mark.parametrize("arch, platform", [("x86_64", "manylinux2014_x86_64"), ("arm64", "manylinux2014_aarch64")])
def test_the_functions_requirements_are_built_for_the_templates_architecture(tmp_path, arch, platform):
    """A requirements.txt beside the tasks gets wheels for Lambda's Linux and ARCH, as the
    layer's orjson does: never the build machine's."""
    _init(tmp_path)
    done = _function_build(tmp_path / "functions/worker", f"ARCH={arch}")
    assert done.returncode == 0, done.stderr
    assert f"--platform {platform} " in done.stdout and "--only-binary=:all:" in done.stdout


def test_the_function_refuses_an_architecture_lambda_does_not_have(tmp_path):
    _init(tmp_path)
    done = _function_build(tmp_path / "functions/worker", "ARCH=aarch64")
    assert done.returncode != 0
    assert "ARCH=aarch64" in done.stdout + done.stderr


CDK_PROJECT = sorted({*PROJECT, "app.py", "cdk.json"} - {"template.yaml"})


def test_init_with_cdk_writes_a_cdk_app_over_the_construct_instead_of_the_template(tmp_path, capsys):
    assert _init(tmp_path / "jobs", "--iac", "cdk") == 0
    assert _tree(tmp_path / "jobs") == CDK_PROJECT
    app = (tmp_path / "jobs/app.py").read_text()
    assert "from kindling.tools.cdk import KindlingWorker, add_outputs" in app
    compile(app, "app.py", "exec")
    import json

    assert json.loads((tmp_path / "jobs/cdk.json").read_text())["app"] == "python3 app.py"
    makefile = (tmp_path / "jobs/Makefile").read_text()
    assert "cdk deploy" not in makefile or "$(CDK) deploy" in makefile
    assert "sam " not in makefile and "build-KindlingLayer" in makefile and "build-WorkerFunction" in makefile
    assert "make synth" in capsys.readouterr().out


def test_a_sam_project_has_none_of_the_cdk_files(tmp_path):
    _init(tmp_path)
    assert not (tmp_path / "app.py").exists() and not (tmp_path / "cdk.json").exists()
    assert "sam deploy" in (tmp_path / "Makefile").read_text()


def test_upgrade_of_a_cdk_project_rewrites_its_layer_makefile_only(tmp_path, capsys):
    _init(tmp_path, "--iac", "cdk")
    (tmp_path / "layers/kindling/Makefile").write_text("old\n")
    assert _init(tmp_path, "--upgrade") == 0
    assert (tmp_path / "layers/kindling/Makefile").read_bytes() == (ROOT / "layers/kindling/Makefile").read_bytes()
    assert not (tmp_path / "template.yaml").exists()
    assert "rewrote layers/kindling/Makefile" in capsys.readouterr().out


def test_a_cdk_projects_readme_tells_the_cdk_commands_not_sam(tmp_path):
    _init(tmp_path, "--iac", "cdk")
    readme = (tmp_path / "README.md").read_text()
    assert "kindling init --iac cdk" in readme and "make synth" in readme and "kindling-jobs[client,cdk]" in readme
    assert "template.yaml  " not in readme and "sam " not in readme.lower().replace("same", "")
