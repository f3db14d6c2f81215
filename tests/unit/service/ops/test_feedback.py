"""The feedback operation without usage records: refused (nothing to link to), with a 409."""

from __future__ import annotations

import pytest

from service.identity import Principal
from service.ops.caller import Caller
from service.ops.feedback import FeedbackArgs, FeedbackOff, give_feedback

pytestmark = pytest.mark.unit


class NoPool:
    def acquire(self) -> None:
        raise AssertionError("the database is not asked when feedback is off")


async def test_feedback_without_usage_records_is_refused() -> None:
    who = Caller(principal=Principal(tenant_id="t", user_id="u", key_id="k"), request_id="r")
    with pytest.raises(FeedbackOff) as off:
        await give_feedback(NoPool(), who, FeedbackArgs(request_id="r0", rating="up"), pending=None)
    assert off.value.status == 409 and off.value.code == "feedback_unavailable"
