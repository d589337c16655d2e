#!/usr/bin/python3
"""Parses a Prometheus text exposition (stdin) with the official client library's parser, which
raises on any malformed line, and prints one line per sample: `name{labels} value`, sorted labels."""
import sys

from prometheus_client.parser import text_string_to_metric_families

for family in text_string_to_metric_families(sys.stdin.read()):
    print(f"# {family.name} {family.type}")
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        print(f"{s.name}{{{labels}}} {s.value!r}")
