"""Container image references (model/): ``[registry[:port]/]path[:tag][@digest]``.

The original split on the last ':' and so broke on ``registry:5000/img`` and
on digests, and defaulted the tag to "master". Kubernetes' rule is: the tag
is what follows the last ':' of the last path component; the digest follows
'@'; with neither, the tag is "latest".
"""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_TAG = "latest"
# The registry's rule for a tag (distribution/reference): a word character, then up to 127 of [\w.-].
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class ImageReference(NamedTuple):
    name: str
    tag: str
    digest: str

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_image(reference: str) -> ImageReference:
    """Split a container image reference into name, tag and digest.

    >>> parse_image("registry:5000/org/img:1.2@sha256:ab")
    ImageReference(name='registry:5000/org/img', tag='1.2', digest='sha256:ab')
    >>> parse_image("nginx")
    ImageReference(name='nginx', tag='latest', digest='')
    """
    reference = reference.strip()
    if not reference or any(c.isspace() for c in reference):
        raise ValueError(f"not an image reference: {reference!r}")
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = ""
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not TAG.fullmatch(tag):
            raise ValueError(f"bad tag {tag!r} in image reference {reference!r}")
    if ":" in name.rpartition("/")[2]:
        raise ValueError(f"more than one tag (':') in image reference {reference!r}")
    if not name:
        raise ValueError(f"no name in image reference {reference!r}")
    if not tag and not digest:
        tag = DEFAULT_TAG
    return ImageReference(name, tag, digest)
