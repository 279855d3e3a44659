"""Kubernetes protobuf (``application/vnd.kubernetes.protobuf``) request bodies -> JSON dicts.

``decode_body(raw)`` turns a body sent by client-go's typed clients (kubectl >= 1.35 for built-in
kinds) into the same dict a JSON client would have sent. See README.md for layout and regeneration.
"""

from kubecore.api.protobuf.decode import (
    MAGIC,
    MEDIA_TYPE,
    decode_body,
    decode_message,
    lookup_kind,
)

__all__ = ["MAGIC", "MEDIA_TYPE", "decode_body", "decode_message", "lookup_kind"]
