"""The harness's report (infra/bench/run.py and its scenario modules, infra/bench/scenarios/) for
the memory-size, TLS, critical-path and Valkey-triggered Lambda scenarios and the throughput
ratios, on made-up samples."""

import importlib.util
import inspect
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "run.py"
_spec = importlib.util.spec_from_file_location("bench_run", _PATH)
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)
sys.path[:] = [p for p in sys.path if not p.startswith(str(_PATH.parent))]  # run.py adds its own dirs
harness = sys.modules["harness"]
# run.py's own modules, kept by it, not left for other tests
for _name in [n for n in sys.modules if n.split(".")[0] in ("stats", "services", "children", "harness", "charts",
                                                             "scenarios")]:
    sys.modules.pop(_name)

K, P, F = harness.KINDLING_COLD, harness.POWERTOOLS_COLD, harness.FLOOR_COLD
DDB = run.SCENARIOS["dynamodb"]


def test_each_scenario_is_a_module_of_its_own_named_as_only_names_it_with_the_drivers_entry():
    assert run.NAMES == ("cold", "memory", "tls", "critical", "imports", "throughput", "dynamodb", "sqs",
                         "lambda_valkey", "enqueue", "latency", "network", "read_memory")
    for name, module in run.SCENARIOS.items():
        assert Path(module.__file__) == _PATH.parent / "scenarios" / f"{name}.py"
        assert list(inspect.signature(module.scenario).parameters) == ["ns", "svc", "layer", "env", "results"]
        assert list(inspect.signature(module.report).parameters) == ["c"]
        assert list(inspect.signature(module.ratio_lines).parameters) == ["c"]


def memory_results():
    return {"memory": {"unit": "ms", "period_us": 14000, "note": "quota", "quotas": {},
                       "sizes": {"128": {K: [800, 900, 700], P: [10000, 8000], F: [750]},
                                 "1769": {K: [70], P: [700], F: [50]}}}}


def test_memory_table_has_a_column_per_size_and_the_ratios():
    md = run.SCENARIOS["memory"].report(memory_results()["memory"])
    assert "| system | 128 MB | 1,769 MB |" in md
    assert f"| {K} | 800 (700-900) | 70.0 (70.0-70.0) |" in md
    assert "| ratio kindling / boto3 + Powertools handler | 1/11 | 0.10x |" in md
    assert "| ratio kindling / floor | 1.07x | 1.40x |" in md


def test_memory_skipped_says_why():
    md = run.SCENARIOS["memory"].report({"skipped": "no writable cgroup cpu controller"})
    assert "Skipped: no writable cgroup cpu controller." in md


def test_ratio_lines_give_memory_and_tls_ratios():
    results = memory_results()
    results["tls"] = {"samples": {f"{K}, HTTP": [70], f"{P}, HTTP": [600], f"{F}, HTTP": [50],
                                  f"{K}, HTTPS": [150], f"{P}, HTTPS": [650], f"{F}, HTTPS": [150]}}
    lines = run.ratio_lines(results)
    assert "cold start at 128 MB: kindling / boto3 + Powertools = 1/11, kindling / floor = 1.07x" in lines
    assert "cold start over HTTPS at 1,769 MB: kindling / floor = 1.00x, kindling / boto3 + Powertools = 0.23x" in lines
    assert f"HTTPS - HTTP, {K}: +80.0 ms" in lines


CP, LV = run.SCENARIOS["critical"], run.SCENARIOS["lambda_valkey"]


def critical_samples():
    s = {}
    for proto, (k, w, f, rtt) in {"HTTP": ([130, 140, 150], [100, 110], [100], [10, 20, 30]),
                                  "HTTPS": ([330], [310], [250], [50])}.items():
        s.update({f"{CP.KINDLING}, {proto}": k, f"{CP.WRITE_ONLY}, {proto}": w, f"{CP.FLOOR}, {proto}": f,
                  f"{CP.ROUND_TRIP}, {proto}": rtt})
    return s


def test_critical_path_ratios_set_the_first_batch_against_floor_plus_a_round_trip():
    r = CP.ratios(critical_samples(), "HTTP")
    assert r["bound"] == 120  # floor 100 + median round trip 20
    assert r["first_batch"] == 140 / 120
    assert r["write_only"] == 105 / 100


def test_critical_path_ratios_are_none_when_a_system_is_missing():
    s = critical_samples()
    del s[f"{CP.ROUND_TRIP}, HTTP"]
    assert CP.ratios(s, "HTTP") == {"first_batch": None, "write_only": 1.05, "bound": None}


def test_critical_path_report_and_verdicts_per_protocol():
    c = {"unit": "ms", "note": "on 1 CPU", "samples": critical_samples()}
    md = CP.report(c)
    assert "| HTTP | 120 | 1.17x | 1.05x |" in md
    assert "duplicate check on an open connection" in md  # what is measured, in one line
    assert "| HTTPS | 300 | 1.10x | 1.24x |" in md
    assert f"| {CP.KINDLING}, HTTP | 140 | 130 | 150 | 3 | - |" in md
    lines = CP.ratio_lines(c)
    assert ("critical path over HTTP: kindling first batch / (floor + one round trip): 1.17 (target <= 1.2): "
            "met") in lines
    assert ("critical path over HTTPS: kindling skip_succeeded=False batch / floor: 1.24 (target <= 1.2): "
            "NOT met") in lines


def test_critical_path_verdicts_skip_a_protocol_not_run():
    s = {k: v for k, v in critical_samples().items() if k.endswith(", HTTP")}
    assert [line.split(":")[0] for line in CP.ratio_lines({"samples": s})] == ["critical path over HTTP"] * 2


def test_latency_rows_give_percentiles_and_ratios_to_the_baseline():
    rows = {r["system"]: r for r in LV.latency_rows({"a": [1, 2, 3, 4, 5], "b": [2, 4, 6, 8, 10]}, "b")}
    assert rows["a"]["p50"] == 3 and rows["a"]["p99"] == 4.96 and rows["a"]["n"] == 5
    assert (rows["a"]["min"], rows["a"]["max"]) == (1, 5)
    assert rows["a"]["ratio_p50"] == 0.5 and rows["b"]["ratio_p99"] == 1


def test_latency_rows_of_an_empty_system_are_none():
    rows = LV.latency_rows({"a": [], "b": [1]}, "b")
    assert rows[0] == {"system": "a", "p50": None, "p99": None, "min": None, "max": None, "n": 0,
                       "ratio_p50": None, "ratio_p99": None}


def lambda_valkey_results(warm=True):
    c = {"cold": {"unit": "ms", "baseline": LV.COLD_SQS, "samples": {LV.COLD_DRAIN: [90, 100], LV.COLD_SQS: [80]}}}
    if warm:
        c["warm"] = {"unit": "ms", "baseline": LV.WARM_SQS, "note": "one at a time", "kicks": 4,
                     "samples": {LV.WARM_DRAIN: [100, 200], LV.WARM_SQS: [300, 500]}}
    return c


def test_lambda_valkey_report_and_verdicts():
    c = lambda_valkey_results()
    md = LV.report(c)
    assert f"| {LV.COLD_DRAIN} | 95.0 | 90.0 | 100 | 2 | 1.19x |" in md
    assert f"| {LV.WARM_DRAIN} | 150 | 199 | 100 | 200 | 2 | 0.38x | 0.40x |" in md
    assert "4 kicks" in md
    assert "a drain event with one noop already on the stream" in md
    lines = LV.ratio_lines(c)
    assert lines[0] == ("cold start Valkey drain / SQS handler (same handler, spawn to first record): 1.19 "
                        "(target <= 1.3): met")
    assert lines[1] == ("warm latency through the deployed function, Valkey drain / SQS: "
                        "p50 150 / 400 ms = 0.38x, p99 199 / 498 ms = 0.40x")


def test_lambda_valkey_report_says_why_the_warm_part_was_skipped():
    c = lambda_valkey_results(warm=False)
    c["warm"] = {"skipped": "needs the deployed stack"}
    assert "Skipped: needs the deployed stack." in LV.report(c)
    assert len(LV.ratio_lines(c)) == 1


def test_sleep_throughput_is_a_ratio_to_the_bare_consumer():
    runs = lambda rate, steady: [{"jobs_per_s": rate, "steady_jobs_per_s": steady, "peak_rss_mib": 10}]  # noqa: E731
    celery, ours, bare = ("Celery (threads c=100 / prefork c=2 for CPU)", "kindling StreamWorker (results in Valkey)",
                          "bare batched consumer (BLMPOP 500)")
    w = {"sleep 10 ms": {"n": 10, "runs": {celery: runs(600, 700), ours: runs(4500, 5000), bare: runs(5000, 5000)}}}
    lines = run.ratio_lines({"throughput": {"workloads": w}})
    assert ("throughput sleep 10 ms, concurrency 100: kindling / bare batched consumer, spawn to last result: 0.9 "
            "(target >= 0.9): met") in lines
    assert ("throughput sleep 10 ms, concurrency 100: kindling / bare batched consumer, steady (10% to 90%): 1 "
            "(target >= 0.9): met") in lines
    assert not any("jobs/s" in line for line in lines)


def test_dynamodb_cpu_table_gives_the_local_clouds_and_each_systems_own_cpu_per_job():
    runs = {DDB.DDB_BASELINE: [{"jobs_per_s": 1000, "server_cpu_ms_per_job": 1.1, "client_cpu_ms_per_job": 0.1},
                               {"jobs_per_s": 900, "server_cpu_ms_per_job": 1.3, "client_cpu_ms_per_job": 0.3}],
            DDB.DDB_STREAM: [{"jobs_per_s": 800, "client_cpu_ms_per_job": 0.25}]}  # moto: no local cloud pids
    md = DDB.cpu_table({"runs": runs})
    assert f"| {DDB.DDB_BASELINE} | 1.200 | 0.200 |" in md
    assert f"| {DDB.DDB_STREAM} | - | 0.250 |" in md


def test_dynamodb_ratios_set_the_check_against_the_write_in_rate_and_in_the_local_clouds_cpu():
    def runs(rate, server):
        return [{"jobs_per_s": rate, "server_cpu_ms_per_job": server, "client_cpu_ms_per_job": 0.1}]

    c = {"baseline": DDB.DDB_BASELINE, "runs": {
        DDB.DDB_BASELINE: runs(1000, 1.0), DDB.DDB_STREAM: runs(800, 1.35), DDB.DDB_CALLS: runs(900, 1.3),
        "BatchWriteItem alone (25 per call, 1 connection)": runs(500, 1.0),
        "kindling SQS handler, warm, events of 10 (1 connection)": runs(200, 2.0)}}
    lines = run.ratio_lines({"dynamodb": c})
    assert ("results in DynamoDB: kindling StreamWorker / BatchWriteItem alone (4 connections): 0.8 "
            "(target >= 0.9): NOT met") in lines
    assert ("results in DynamoDB: the local cloud's CPU per job, the StreamWorker's store calls / BatchWriteItem "
            "alone = 1.30x") in lines


def test_span_of_reads_a_child_that_prints_more_than_a_pipe_holds(monkeypatch):
    import threading

    monkeypatch.setattr(harness, "tree_rss", lambda proc: 0)
    child = [sys.executable, "-c", "import sys; sys.stdout.write('log line\\n' * 40000); print('SPAN 1.5')"]
    got = []
    reader = threading.Thread(target=lambda: got.append(harness.span_of(child, {})), daemon=True)
    reader.start()
    reader.join(30)
    assert got == [(1.5, 0.0)]  # with pipes the child blocked on its 64 KiB and this waited for ever


def test_a_watched_worker_that_logs_more_than_a_pipe_holds_runs_to_its_end_and_its_error_is_read():
    """The workers the harness samples while they run (throughput, cold starts, latency) write
    stderr to a file: into a pipe nobody reads, the 64 KiB-th byte would block them for good."""
    import subprocess

    child = [sys.executable, "-c", "import sys; sys.stderr.write('log line\\n' * 40000 + 'the end'); sys.exit(3)"]
    proc = harness.children.popen(child, stdout=subprocess.DEVNULL)
    try:
        assert proc.wait(30) == 3  # with stderr=PIPE: TimeoutExpired, the child stuck on its write
    finally:
        proc.kill()
    tail = harness.children.stderr_tail(proc, limit=50)
    assert tail.endswith("log line\nthe end") and len(tail) == 50


def test_each_repetition_starts_with_the_next_system_so_none_always_runs_first():
    systems = ["a", "b", "c"]
    orders = [harness.rotated(systems, i) for i in range(4)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert harness.rotated([], 2) == []


def test_read_memory_gives_each_read_size_over_the_idle_worker_and_arq_beside_it():
    rm = run.SCENARIOS["read_memory"]

    def runs(*pairs):
        return [{"peak_rss_mib": mib, "jobs_per_s": rate} for mib, rate in pairs]

    c = {"n": 5000, "runs": {
        rm.IDLE: runs((15.0, None), (15.2, None)), rm.fixed(100): runs((16.0, 9000.0)),
        rm.fixed(500): runs((18.0, 11000.0)), rm.fixed(2000): runs((19.0, 12000.0), (21.0, 14000.0)),
        rm.GROWN: runs((19.5, 12500.0)), rm.ARQ: runs((32.0, 900.0))}}
    md = rm.report(c)
    assert "| kindling, read size 2,000 | 20.0 | 19.0 | 21.0 | +4.9 | 13,000 |" in md
    assert "| kindling, idle (empty stream) | 15.1 | 15.0 | 15.2 |  | - |" in md
    assert rm.ratio_lines(c) == [
        "peak RSS, 5,000 no-ops, read size 2,000 / 100: 1.25x (20.0 / 16.0 MiB; idle 15.1 MiB)",
        "peak RSS, 5,000 no-ops, kindling (defaults) / arq: 0.61x (19.5 / 32.0 MiB)"]
