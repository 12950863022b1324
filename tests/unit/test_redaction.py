"""Secret values in raw Kubernetes YAML are hidden in what is shown (model/redaction.py)."""

from __future__ import annotations

import yaml

from kuberaven.model.redaction import HIDDEN, UNREADABLE, redact_resource_definition

DEFINITION = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
---
apiVersion: v1
kind: Secret
metadata: {name: db}
data: {password: aHVudGVyMg==}
stringData: {token: hunter2}
"""


def test_every_secret_value_is_hidden_and_its_keys_and_the_rest_kept() -> None:
    shown = redact_resource_definition(DEFINITION)
    assert shown is not None and "hunter2" not in shown and "aHVudGVyMg==" not in shown
    config_map, secret = yaml.safe_load_all(shown)
    assert config_map["data"] == {"mode": "fast"}
    assert secret["data"] == {"password": HIDDEN} and secret["stringData"] == {"token": HIDDEN}
    assert secret["metadata"] == {"name": "db"}


def test_secrets_inside_a_list_are_hidden() -> None:
    secret = "{apiVersion: v1, kind: Secret, metadata: {name: a}, data: {k: c2VjcmV0}}"
    listed = f"apiVersion: v1\nkind: List\nitems:\n- {secret}\n"
    shown = redact_resource_definition(listed)
    assert shown is not None and "c2VjcmV0" not in shown
    assert yaml.safe_load(shown)["items"][0]["data"] == {"k": HIDDEN}


def test_a_definition_without_a_secret_is_shown_as_written() -> None:
    text = "# a comment kept\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
    assert redact_resource_definition(text) == text
    assert redact_resource_definition(None) is None and redact_resource_definition("") == ""


def test_unreadable_yaml_is_not_shown_since_it_may_hold_a_secret() -> None:
    assert redact_resource_definition("kind: Secret\ndata: {password: [unclosed\n") == UNREADABLE
