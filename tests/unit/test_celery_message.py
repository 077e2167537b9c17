"""Celery's task message (protocol 2, as kombu's SQS transport sends it) read as a job by
kindling.core.envelope.decode_job, and refused with a reason where kindling cannot honour it."""

from __future__ import annotations

import re

import pytest
from kindling.core.envelope import decode_job
from kindling.core.errors import InvalidJob
from support.celery_messages import celery_body

ID = "0b1c5a4e-3f0e-4c53-9b6a-2f7f5d1e9a11"


@pytest.mark.parametrize("b64", [True, False], ids=["base64", "raw_json"])
def test_a_celery_message_is_the_job_it_asks_for(b64):
    job = decode_job(celery_body("orders.add", [2, 3], {"c": 1}, task_id=ID, b64=b64))
    assert (job.id, job.task, job.args, job.kwargs, job.not_before, job.timeout) == (
        ID, "orders.add", [2, 3], {"c": 1}, None, None)


def test_eta_and_the_earlier_time_limit_are_carried_over():
    job = decode_job(celery_body("orders.add", [], {}, eta="2030-01-02T03:04:05.500000+00:00", timelimit=[30, 20]))
    assert job.not_before == 1893553445500
    assert job.timeout == 20  # the soft limit, where Celery's worker raises into the task
    naive = decode_job(celery_body("orders.add", [], {}, eta="2030-01-02T03:04:05.500000"))
    assert naive.not_before == 1893553445500  # Celery's naive eta is UTC


@pytest.mark.parametrize(("embed", "what"), [
    ({"callbacks": [{"task": "x"}]}, "link callbacks"),
    ({"errbacks": [{"task": "x"}]}, "link_error callbacks"),
    ({"chain": [{"task": "x"}]}, "a Celery chain"),
    ({"chord": {"task": "x"}}, "a Celery chord"),
])
def test_what_kindling_cannot_honour_is_refused_with_the_reason_and_the_claimed_id(embed, what):
    with pytest.raises(InvalidJob, match=f"{what} cannot be honoured") as refused:
        decode_job(celery_body("orders.add", [1], {}, task_id=ID, embed=embed))
    assert (refused.value.job_id, refused.value.task) == (ID, "orders.add")


def test_a_serializer_other_than_json_is_refused():
    with pytest.raises(InvalidJob, match="serializer .*JSON only"):
        decode_job(celery_body("orders.add", [1], {}, content_type="application/x-python-serialize"))


def test_base64_that_is_not_a_celery_message_is_still_not_json():
    with pytest.raises(InvalidJob, match="neither a kindling envelope nor a Celery task message"):
        decode_job(b"eyJhIjogMX0=")  # base64 of {"a": 1}


def test_a_message_past_its_expires_is_not_run():
    with pytest.raises(InvalidJob, match="expired at 2021-01-01T00:00:00"):
        decode_job(celery_body("orders.add", [1], {}, expires="2021-01-01T00:00:00+00:00"))
    assert decode_job(celery_body("orders.add", [1], {}, expires="2099-01-01T00:00:00+00:00")).args == [1]


@pytest.mark.parametrize("timelimit", [[0, None], [None, "10"], [True, None], [1]], ids=["zero", "text", "bool", "one"])
def test_a_time_limit_that_is_not_seconds_is_refused_once_under_the_id(timelimit):
    with pytest.raises(InvalidJob) as refused:
        decode_job(celery_body("orders.add", [1], {}, task_id=ID, timelimit=timelimit))
    assert refused.value.reason.count("Celery task message:") == 1 and re.search("time ?limit", refused.value.reason)
    assert (refused.value.job_id, refused.value.keyed) == (ID, True)
