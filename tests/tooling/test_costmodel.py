"""infra/bench/costmodel.py: the arithmetic, checked by hand on round inputs."""

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "infra/bench/costmodel.py"
_spec = importlib.util.spec_from_file_location("costmodel", _PATH)
cm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cm)


def bench(handler=(400.0, 500.0, 600.0), celery_noop=(200.0,), celery_sleep=(250.0,)) -> dict:
    def runs(values):
        return [{"jobs_per_s": v} for v in values]

    return {
        "meta": {"cpus": 2, "stamp": "T", "quick": True},
        "dynamodb": {"endpoint": "LocalStack", "runs": {
            "BatchWriteItem alone (25 per call, 4 connections)": runs([9999.0]),
            "kindling SQS handler, warm, events of 10 (1 connection)": runs(handler)}},
        "throughput": {"workloads": {
            "noop": {"runs": {"Celery (threads c=100)": runs(celery_noop), "kindling StreamWorker": runs([1.0])}},
            "sleep 10 ms": {"runs": {"Celery (threads c=100)": runs(celery_sleep)}}}},
    }


@pytest.fixture
def inputs():
    return cm.read_inputs(bench())


def test_the_measured_inputs_are_the_medians_of_the_runs(inputs):
    assert inputs["handler_rate"] == 500.0 and inputs["celery_noop"] == 200.0 and inputs["celery_sleep"] == 250.0


def test_cost_per_million_noop_jobs_by_hand(inputs):
    items = cm.per_million(inputs, 0.0, 512)
    # 100,000 invocations of 10 jobs, each 10 / 500 = 20 ms at 0.5 GB: 1,000 GB-s
    assert items["lambda requests"] == pytest.approx(100_000 * 0.20 / 1e6)  # $0.02
    assert items["lambda GB-s x86"] == pytest.approx(1_000 * 0.0000166667)  # $0.0166667
    assert items["lambda GB-s arm64"] == pytest.approx(1_000 * 0.0000133334)
    # 100,000 batches x (send, receive, delete) = 300,000 requests
    assert items["sqs standard"] == pytest.approx(0.12) and items["sqs fifo"] == pytest.approx(0.15)
    # per job: the record and its by_task entry (2 WRU), the duplicate check (1 RRU)
    assert items["dynamodb writes"] == pytest.approx(2 * 0.625) and items["dynamodb reads"] == pytest.approx(0.125)
    # 1M records x 720 bytes kept 14 of 30 days at $0.25 per GB-month
    assert items["dynamodb storage"] == pytest.approx(0.72 * 14 / 30 * 0.25)
    assert cm.totals(items)["x86"] == pytest.approx(0.02 + 0.0166667 + 0.12 + 1.25 + 0.125 + 0.084)


def test_a_100_ms_job_adds_its_time_to_each_batch(inputs):
    # 20 ms + 10 x 100 ms = 1.02 s per batch: 100,000 x 1.02 x 0.5 = 51,000 GB-s
    assert cm.batch_seconds(500.0, 0.1) == pytest.approx(1.02)
    assert cm.per_million(inputs, 0.1, 512)["lambda GB-s x86"] == pytest.approx(51_000 * 0.0000166667)
    assert cm.per_million(inputs, 0.1, 1024)["lambda GB-s x86"] == pytest.approx(102_000 * 0.0000166667)


def test_celery_is_priced_per_node_hour_at_the_measured_rate(inputs):
    # 1M jobs at 200 jobs/s = 1.389 node-hours of c6i.large ($0.085) / c7g.large ($0.0725)
    assert cm.celery_per_million(inputs, 0.0) == pytest.approx({"x86": 1e6 / 720_000 * 0.085,
                                                                "arm64": 1e6 / 720_000 * 0.0725})
    # a 100 ms job that waits: 100 threads allow 1,000/s, the measured sleep workload 250/s
    assert cm.celery_node_rate(inputs, 0.1) == 250.0
    assert cm.celery_node_rate(inputs, 1.0) == 100.0  # 100 threads of 1 s jobs


def test_what_binds_first_at_each_rate(inputs):
    # noop: 500 jobs/s per instance; nothing reaches a limit at 1,000/s, the nearest is the
    # new table's 4,000 WRU/s (25%)
    (name, load, _), = cm.binding(inputs, 1_000, 0.0)
    assert name.startswith("new on-demand table") and load == pytest.approx(0.25)
    assert cm.concurrency_needed(inputs, 1_000, 0.0) == 2
    # 10,000/s: 2.5x the new table and the one-task index (4 x 1,000), 2x MaxConcurrency 10 (5,000/s)
    rows = cm.binding(inputs, 10_000, 0.0)
    assert [round(load, 2) for _, load, _ in rows] == [2.5, 2.5, 2.0]
    assert rows[2][0].startswith("ESM MaximumConcurrency = 10")
    # 100 ms jobs: 10 / 1.02 s = 9.8 jobs/s per instance; 10,000/s needs 1,020 instances
    assert cm.concurrency_needed(inputs, 10_000, 0.1) == 1_020
    names = [n for n, _, _ in cm.binding(inputs, 10_000, 0.1)]
    assert "Lambda: 1,000 concurrent per Region" in names and "one SQS mapping: 1,250 batches at once" not in names


def test_the_report_prints_the_inputs_it_used(inputs, tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench()))
    assert cm.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "median 500 jobs/s per warm instance (runs 400, 500, 600" in out and "a model, not a measurement" in out
    assert "| noop | $0.020 |" in out


def test_a_bench_without_the_scenarios_it_needs_is_refused_clearly(tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"meta": {}, "cold": {}}))
    assert cm.main([str(path)]) == 2
    assert "needs the dynamodb and throughput scenarios" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cm.main([str(path), "--memory-mb", "64"])


def test_a_results_policy_that_records_no_success_pays_no_dynamodb_for_it(inputs):
    # 500 jobs/s per instance: Lambda $0.02 + $0.0167, SQS $0.12; no record, no check
    items = cm.per_million(inputs, 0.0, 512, "failures", task_index=False)
    assert (items["dynamodb writes"], items["dynamodb reads"], items["dynamodb storage"]) == (0, 0, 0)
    assert cm.totals(items)["x86"] == pytest.approx(0.02 + 0.0166667 + 0.12)
    assert cm.totals(items)["x86"] <= 0.20  # the target at 512 MB x86
    # the default without its by_task index: the record and the check
    assert cm.units_per_job("all", task_index=False) == (1, 1) and cm.units_per_job("all") == (2, 1)
    with pytest.raises(ValueError, match="results must be one of"):
        cm.units_per_job("some")


def test_the_powertools_handler_pays_one_write_unit_per_job(inputs):
    items = cm.powertools_per_million(inputs, 0.0, 512)
    assert items["dynamodb writes"] == pytest.approx(0.625) and items["dynamodb reads"] == 0
    rows = dict(cm.policy_rows(inputs, 512))
    assert list(rows)[:2] == ["results='all', by_task on", "results='all', by_task off"]
    assert cm.totals(rows[cm.POWERTOOLS])["x86"] < cm.totals(rows["results='all', by_task on"])["x86"]


# -- start-up: INIT billing, SnapStart, and the SQS trigger's provisioned mode


def test_init_and_restore_per_million_jobs_by_hand():
    # 1,000 cold starts per million jobs at 1 GB: 1,000 x 0.5 s x 1 GB x the x86 GB-s price.
    assert cm.init_usd_per_million(500, 1_000, 1024, "x86") == pytest.approx(1_000 * 0.5 * cm.LAMBDA_GB_S_X86_USD)
    assert cm.restore_usd_per_million(1_000, 512) == pytest.approx(1_000 * 0.5 * cm.SNAPSTART_RESTORE_GB_USD)


def test_snapstart_pays_in_money_only_for_an_init_longer_than_a_restore_costs():
    """A restore costs the same per GB whatever the init took: it pays once the init's
    GB-seconds cost more, about 8.4 s on x86 (10.5 s on arm64), at any memory size."""
    x86 = cm.snapstart_break_even_init_ms("x86")
    assert x86 == pytest.approx(cm.SNAPSTART_RESTORE_GB_USD / cm.LAMBDA_GB_S_X86_USD * 1000)
    assert 8_300 < x86 < 8_500 and 10_400 < cm.snapstart_break_even_init_ms("arm64") < 10_600
    at = x86 * 1.01
    assert cm.init_usd_per_million(at, 10, 2048, "x86") > cm.restore_usd_per_million(10, 2048)


def test_a_cached_snapshot_costs_a_month_of_gb_seconds_and_at_least_three_hours_per_version():
    assert cm.snapstart_cache_usd(512, 30 * 86_400) == pytest.approx(0.5 * 30 * 86_400 * cm.SNAPSTART_CACHE_GB_S_USD)
    assert cm.snapstart_cache_usd(512, 60) == cm.snapstart_cache_usd(512, 3 * 3600)


def test_provisioned_mode_reaches_further_and_faster():
    assert cm.trigger_ceiling(provisioned=False) == 1_000  # MaximumConcurrency's maximum, under 1,250 batches
    assert cm.trigger_ceiling(provisioned=True) == 20_000
    assert cm.minutes_to_reach(900, provisioned=False) == 3  # +300 a minute
    assert cm.minutes_to_reach(3_000, provisioned=True) == 3  # +1,000 a minute
    assert cm.minutes_to_reach(3_000, provisioned=False) is None  # beyond one mapping's reach


def test_the_start_up_report_needs_no_bench_run(capsys):
    assert cm.main(["--start-up", "--memory-mb", "512"]) == 0
    out = capsys.readouterr().out
    assert "SnapStart" in out and "provisioned" in out
    assert f"{cm.snapstart_break_even_init_ms('x86'):,.0f} ms" in out
