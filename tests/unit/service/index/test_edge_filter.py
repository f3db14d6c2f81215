"""The Edge adapter's pre-filter: a principal's tenant and ACL conditions are made once and
reused, never another principal's."""

from __future__ import annotations

import qdrant_edge as qe

from service.index.edge_filters import tenant_acl_filter
from service.index.filters import FilterSpec, Match


def test_a_principals_filter_is_made_once() -> None:
    a = tenant_acl_filter("acme", frozenset({"public", "user:u1"}))
    assert a is tenant_acl_filter("acme", frozenset({"user:u1", "public"}))


def test_another_tenant_or_fewer_groups_get_their_own_filter() -> None:
    mine = repr(tenant_acl_filter("acme", frozenset({"public", "group:eng"})))
    assert "acme" in mine and "group:eng" in mine
    other_tenant = repr(tenant_acl_filter("globex", frozenset({"public", "group:eng"})))
    assert "acme" not in other_tenant and "globex" in other_tenant
    fewer = repr(tenant_acl_filter("acme", frozenset({"public"})))
    assert "group:eng" not in fewer


def test_metadata_and_id_conditions_add_to_the_principals() -> None:
    ids = {"2de7a382-d9f6-566a-b162-194dee68416a"}
    extra = FilterSpec(conditions=(Match(field="lang", value="hi"),))
    flt = repr(tenant_acl_filter("acme", frozenset({"public"}), extra, ids))
    assert "acme" in flt and "lang" in flt and "2de7a382" in flt
    # the principal's own filter is untouched by what was added to a copy of its conditions
    assert "lang" not in repr(tenant_acl_filter("acme", frozenset({"public"})))
    assert isinstance(tenant_acl_filter("acme", frozenset({"public"})), qe.Filter)
