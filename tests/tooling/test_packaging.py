"""The package people install: ``python -m build`` makes an sdist and a wheel (the wheel built
from the sdist, as a user's ``pip install`` from source would), named ``kindling-jobs`` on
PyPI, importable as ``kindling``, versioned in one place (kindling/__init__.py).

Everything here runs without a network: the build uses this virtualenv's setuptools
(``--no-isolation``), and the fresh virtualenv gets orjson copied from this one.
"""

from __future__ import annotations

import ast
import email
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "layers/kindling/kindling"
DIST = "kindling-jobs"


def source_version() -> str:
    """``__version__`` as kindling/__init__.py spells it (read, not imported)."""
    for node in ast.parse((SOURCE / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__version__"]:
            return node.value.value
    raise AssertionError("kindling/__init__.py assigns no literal __version__")


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """``make dist`` (the release's command), run in a copy of the checkout with this virtualenv's
    Python (``-o``: the copy's own .venv is not made)."""
    out = tmp_path_factory.mktemp("dist")
    # From a copy of the checkout (what a clone holds): a build writes beside its sources, and
    # the suite's other processes read and build in the checkout meanwhile.
    src = tmp_path_factory.mktemp("checkout") / "kindling"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".state", ".aws-sam", "bench-results", "build", "dist", "*.egg-info", "__pycache__",
        ".pytest_cache", ".hypothesis", ".ruff_cache", "node_modules"))
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "dist", f"PY={sys.executable}",
                           f"DIST_DIR={out}"], cwd=src, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(meta))


def test_the_wheel_and_sdist_are_named_for_pypi_and_versioned_by_kindling_dunder_version(dists):
    version = source_version()
    assert dists["wheel"].name == f"kindling_jobs-{version}-py3-none-any.whl"
    assert dists["sdist"].name == f"kindling_jobs-{version}.tar.gz"
    meta = wheel_metadata(dists["wheel"])
    assert (meta["Name"], meta["Version"]) == (DIST, version)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # one place: __init__.py


def test_the_wheel_holds_every_module_the_typing_files_the_dashboard_page_and_the_license(dists):
    names = set(wheel_names(dists["wheel"]))
    package = {f"kindling/{p.relative_to(SOURCE).as_posix()}" for p in SOURCE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")}
    assert {"kindling/py.typed", "kindling/core/registry.pyi", "kindling/tools/dashboard/static/index.html"} <= package
    assert package - names == set()
    dist_info = f"kindling_jobs-{source_version()}.dist-info"
    assert f"{dist_info}/licenses/LICENSE" in names
    with zipfile.ZipFile(dists["wheel"]) as z:
        entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
    assert re.search(r"^kindling = kindling\.tools\.cli:main$", entry_points, re.M), entry_points
    # kindling's pytest plugin: pytest finds it by this entry point wherever the wheel is installed.
    assert re.search(r"^\[pytest11\]\nkindling = kindling\.tools\.pytest_plugin$", entry_points, re.M), entry_points


def test_the_wheel_holds_the_kindling_package_only_never_the_tests_or_the_example_worker(dists):
    outside = sorted(n for n in wheel_names(dists["wheel"])
                     if not n.startswith(("kindling/", f"kindling_jobs-{source_version()}.dist-info/")))
    assert outside == []
    # The scaffold's files (kindling init) include the user's own example tests: package data.
    ours = [n for n in wheel_names(dists["wheel"]) if not n.startswith("kindling/scaffold_files/")]
    assert not [n for n in ours if "/tests/" in n or n.rsplit("/", 1)[-1].startswith("test_")]


def test_the_runtime_requires_orjson_only_and_boto3_comes_with_the_client_extra(dists):
    requires = wheel_metadata(dists["wheel"]).get_all("Requires-Dist")
    always = [r for r in requires if "extra ==" not in r]
    assert [re.match(r"[A-Za-z0-9_.-]+", r).group() for r in always] == ["orjson"]
    client = [r.split(";")[0].strip() for r in requires if re.search(r'extra == "client"', r)]
    assert [re.match(r"[A-Za-z0-9_.-]+", r).group() for r in client] == ["boto3"]


def test_the_cdk_construct_ships_with_its_extra_and_its_scaffold(dists):
    """kindling.tools.cdk is in the wheel with the CDK project's files; aws-cdk-lib comes only with
    the cdk extra (the layer leaves the module out: tests/unit/test_cold_path.py)."""
    requires = wheel_metadata(dists["wheel"]).get_all("Requires-Dist")
    cdk = [r.split(";")[0].strip() for r in requires if re.search(r'extra == "cdk"', r)]
    assert sorted(re.match(r"[A-Za-z0-9_.-]+", r).group() for r in cdk) == ["aws-cdk-lib", "constructs"]
    names = set(wheel_names(dists["wheel"]))
    assert {"kindling/tools/cdk.py", "kindling/scaffold_files/cdk/app.py.tmpl", "kindling/scaffold_files/cdk/cdk.json",
            "kindling/scaffold_files/cdk/Makefile.tmpl"} <= names


def _fresh_venv(where: Path, *dists: str) -> tuple[Path, Path]:
    """A virtualenv with pip and, copied from this one, orjson and the distributions named (so
    installing kindling's wheel needs no index: its requirements are already there)."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True, timeout=120)
    python = where / "bin/python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    for name in ("orjson", *dists):
        _copy_distribution(name, site)
    return python, site


def _copy_distribution(name: str, site: Path) -> None:
    """An installed distribution's files (its RECORD) copied into ``site``, as pip would have
    installed them there; scripts outside site-packages are left out."""
    from importlib import metadata

    dist = metadata.distribution(name)
    for file in dist.files or ():
        source = Path(dist.locate_file(file))
        if ".." in file.parts or not source.is_file():
            continue
        target = site / file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _copy_closure(requirement: str, site: Path) -> list[str]:
    """Every distribution ``requirement`` needs (its extras' too, markers evaluated here),
    copied from this virtualenv into ``site``; kindling-jobs itself is left to pip. Returns
    their names."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset[str]]] = set()
    names: list[str] = []
    todo = [Requirement(requirement)]
    while todo:
        req = todo.pop()
        key = (req.name.lower().replace("_", "-"), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(req.name)
        for spec in dist.requires or ():
            dep = Requirement(spec)
            if dep.marker is None or any(dep.marker.evaluate({"extra": extra}) for extra in req.extras or {""}):
                todo.append(dep)
        if key[0] != "kindling-jobs" and dist.metadata["Name"] not in names:
            names.append(dist.metadata["Name"])
            _copy_distribution(dist.metadata["Name"], site)
    return names


def _install_and_init(python: Path, requirement: str, wheel_dir: Path, where: Path, env: dict[str, str]) -> Path:
    """``requirement`` installed offline from ``wheel_dir`` with ``python``'s pip, then
    ``kindling init app`` in ``where``; returns the project's folder."""
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                                "--quiet", "--find-links", str(wheel_dir), requirement],
                               capture_output=True, text=True, env=env, cwd=where, timeout=120)
    assert installed.returncode == 0, installed.stderr
    init = subprocess.run([str(python.parent / "kindling"), "init", "app"], capture_output=True, text=True,
                          env=env, cwd=where, timeout=60)
    assert init.returncode == 0, init.stderr
    return where / "app"


def _clean_env() -> dict[str, str]:
    """This process's environment without what ties a child to this checkout or this pytest run."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONSTARTUP") and not k.startswith("PYTEST_")}


EAGER = """
from kindling import task
from kindling.tools.testing import eager

@task
def add(x, y):
    return x + y

with eager():
    assert add.delay(1, 2).result() == 3
print("eager ok")
"""


@pytest.mark.slow
def test_the_installed_wheel_prints_its_version_and_runs_a_task_eagerly_without_boto3(dists, tmp_path):
    python, site = _fresh_venv(tmp_path / "venv")
    env = _clean_env()
    pip = [str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "--quiet"]
    # With its dependencies resolved, index-less: it succeeds only if orjson is all it needs.
    subprocess.run([*pip, str(dists["wheel"])], check=True, capture_output=True, env=env, timeout=120)
    version = subprocess.run([str(python.parent / "kindling"), "--version"], check=True, capture_output=True,
                             text=True, env=env, cwd=tmp_path, timeout=60).stdout
    assert version.strip() == f"kindling {source_version()}"
    (tmp_path / "example.py").write_text(EAGER)
    ran = subprocess.run([str(python), "example.py"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "eager ok", ran.stderr
    kindling_from = subprocess.run([str(python), "-c", "import kindling; print(kindling.__file__)"], check=True,
                                   capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60).stdout
    assert kindling_from.startswith(str(site)), kindling_from  # the installed copy, not the source tree
    boto3 = subprocess.run([str(python), "-c", "import boto3"], capture_output=True, text=True, env=env, timeout=60)
    assert "No module named 'boto3'" in boto3.stderr
    # The producers' extra is what asks for boto3 (here: refused, there is no index to find it in).
    extra = subprocess.run([*pip, f"{dists['wheel']}[client]"], capture_output=True, text=True, env=env,
                           timeout=120)
    assert extra.returncode != 0 and "boto3" in extra.stderr, extra.stderr


@pytest.mark.slow
def test_a_new_project_from_the_installed_wheel_passes_its_own_tests_outside_the_checkout(dists, tmp_path):
    """The install path a user has before any release: the wheel ``make dist`` builds, installed
    offline (``--no-index``) into a virtualenv that has never seen this checkout, then
    ``kindling init app`` and the project's own ``make test``."""
    python, site = _fresh_venv(tmp_path / "venv", "pytest", "pluggy", "iniconfig", "packaging", "pygments")
    env = _clean_env()
    _install_and_init(python, "kindling-jobs", dists["wheel"].parent, tmp_path, env)
    where = subprocess.run([str(python), "-c", "import kindling, sys; print(kindling.__file__); print(sys.path)"],
                           check=True, capture_output=True, text=True, env=env, cwd=tmp_path / "app",
                           timeout=60).stdout
    assert where.startswith(str(site)) and str(ROOT) not in where, where  # the wheel's copy; no checkout on the path
    tests = subprocess.run(["make", "test", f"PYTHON={python}"], capture_output=True, text=True, env=env,
                           cwd=tmp_path / "app", timeout=180)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    # The eager tests, through kindling's pytest plugin (the wheel's entry point); the one on
    # moto is skipped: this virtualenv has neither moto nor boto3.
    assert re.search(r"\b3 passed, 1 skipped\b", tests.stdout) and "failed" not in tests.stdout, tests.stdout


def test_the_sdist_holds_the_license_and_the_package_and_no_tests(dists):
    import tarfile

    with tarfile.open(dists["sdist"]) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert {"LICENSE", "README.md", "pyproject.toml", "layers/kindling/kindling/__init__.py"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "functions/", "infra/"))]


def test_the_changelog_has_an_unreleased_section_and_its_newest_release_is_the_package_version():
    headings = re.findall(r"^## \[([^]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[0] == "Unreleased"
    assert headings[1] == source_version(), headings


@pytest.mark.slow
def test_make_dev_from_the_installed_wheel_runs_a_job_the_dashboard_shows_outside_the_checkout(dists, tmp_path):
    """A user's first local run before any release: the wheel installed offline with its demo
    extra (boto3 and moto's server, copied in as pip would have installed them) into a
    virtualenv that never saw this checkout, ``kindling init app``, then ``make dev``."""
    from support.devflow import make_dev_runs_a_job_the_dashboard_shows

    python, site = _fresh_venv(tmp_path / "venv")
    assert "moto" in _copy_closure("kindling-jobs[demo]", site)
    env = _clean_env()
    _install_and_init(python, "kindling-jobs[demo]", dists["wheel"].parent, tmp_path, env)
    where = subprocess.run([str(python), "-c", "import kindling, moto; print(kindling.__file__, moto.__file__)"],
                           check=True, capture_output=True, text=True, env=env, cwd=tmp_path / "app",
                           timeout=60).stdout
    assert where.count(str(site)) == 2 and str(ROOT) not in where, where  # the wheel's copy; no checkout
    make_dev_runs_a_job_the_dashboard_shows(tmp_path / "app", str(python))
