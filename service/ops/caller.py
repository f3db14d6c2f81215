"""Who calls an operation, as the transport established it."""

from __future__ import annotations

from dataclasses import dataclass

from service.admission.gate import INTERACTIVE
from service.identity import Principal


@dataclass(frozen=True, slots=True)
class Caller:
    principal: Principal
    request_id: str
    admission: str = INTERACTIVE
    """The admission class (`interactive` or `batch`): whose limits and bucket apply."""
    tenant_admitted: bool = False
    """The transport already took this request's token from the tenant's bucket."""

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id
