"""An S3-compatible bucket as a source (AWS S3, MinIO, R2, Ceph…), through boto3.

`root` is `s3://bucket/prefix`; document ids are keys relative to the prefix. The listing's ETag
of each object decides whether it changed, so an unchanged object is never downloaded.
Credentials come from boto3's usual chain (environment, profile, instance role): never stored.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from indexing.sources.remote_sync import Fetched, RemoteObject, selected, suffix_of
from service.db.sources import ObjectState, SourceRow


def parse_root(root: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> (bucket, "some/prefix/")."""
    u = urlparse(root)
    if u.scheme != "s3" or not u.netloc:
        raise ValueError(f"an S3 root looks like s3://bucket/prefix, got {root!r}")
    prefix = u.path.lstrip("/")
    return u.netloc, (prefix.rstrip("/") + "/") if prefix else ""


class S3Fetcher:
    def __init__(self, src: SourceRow, client: Any = None) -> None:
        import boto3  # noqa: PLC0415 - heavy, and only S3 sources need it

        self.src = src
        self.bucket, self.prefix = parse_root(src.root)
        opts = src.options
        self.client = client or boto3.client(
            "s3",
            endpoint_url=opts.get("endpoint_url") or None,
            region_name=opts.get("region") or None,
        )
        self.origin_prefix = f"s3://{self.bucket}/{self.prefix}"

    def listing(self) -> list[RemoteObject]:
        out = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                rel = key[len(self.prefix) :]
                if not rel or rel.endswith("/") or not selected(rel, self.src.options):
                    continue
                if any(part.startswith(".") for part in rel.split("/")):
                    continue
                out.append(
                    RemoteObject(
                        key=key,
                        doc_id=rel,
                        suffix=suffix_of(rel),
                        etag=str(obj.get("ETag", "")).strip('"'),
                        last_modified=obj["LastModified"].isoformat()
                        if obj.get("LastModified")
                        else "",
                    )
                )
        return out

    def fetch(self, obj: RemoteObject, known: ObjectState | None) -> Fetched | None:
        kw: dict[str, Any] = {}
        if known is not None and known.etag:
            kw["IfNoneMatch"] = f'"{known.etag}"'
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=obj.key, **kw)
        except Exception as exc:
            status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 304:
                return None
            raise
        return Fetched(data=resp["Body"].read(), etag=str(resp.get("ETag", "")).strip('"'))

    def origin(self, obj: RemoteObject) -> str:
        return f"s3://{self.bucket}/{obj.key}"
