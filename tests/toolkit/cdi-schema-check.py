#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks CDI spec files (YAML) against the CDI JSON schema in $GPUOP_SHARED/reference/upstream
(cdi_schema_schema.json, which $refs cdi_schema_defs.json as "defs.json"), plus the rules the CDI
library adds beyond the schema: a known cdiVersion, kind "vendor/class", device names unique and
of the allowed characters. Exit 0 valid, 1 invalid (each problem on a line), 77 when the schema
or python3-jsonschema / python3-yaml is missing (a cross-check, skipped in a fresh clone).

usage: cdi-schema-check.py SPEC.yaml...
"""
import json
import os
import re
import sys

shared = os.environ.get("GPUOP_SHARED", "")
up = os.path.join(shared, "reference", "upstream")
schema_path = os.path.join(up, "cdi_schema_schema.json")
defs_path = os.path.join(up, "cdi_schema_defs.json")
if not (shared and os.path.isfile(schema_path) and os.path.isfile(defs_path)):
    print("SKIP: the CDI schema is not in $GPUOP_SHARED (%s)" % (shared or "unset"))
    sys.exit(77)
try:
    import jsonschema
    import yaml
except ImportError as ex:
    print("SKIP: %s (python3-jsonschema and python3-yaml check the specs)" % ex)
    sys.exit(77)

VERSIONS = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
KIND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9]/[A-Za-z0-9][A-Za-z0-9_.-]*$")

schema = json.load(open(schema_path))
defs = json.load(open(defs_path))
schema["$id"] = "file:///cdi/schema.json"
defs["$id"] = "file:///cdi/defs.json"
try:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7
    registry = Registry().with_resources(
        [("file:///cdi/defs.json", Resource.from_contents(defs, default_specification=DRAFT7))])
    validator = jsonschema.Draft7Validator(schema, registry=registry)
except ImportError:
    resolver = jsonschema.RefResolver("file:///cdi/schema.json", schema,
                                      store={"file:///cdi/defs.json": defs})
    validator = jsonschema.Draft7Validator(schema, resolver=resolver)

bad = 0
for path in sys.argv[1:]:
    problems = []
    try:
        spec = yaml.safe_load(open(path))
    except Exception as ex:  # a spec that is not YAML
        problems.append("not YAML: %s" % ex)
        spec = None
    if spec is not None:
        for err in validator.iter_errors(spec):
            problems.append("schema: %s at %s" % (err.message, "/".join(map(str, err.path))))
        if isinstance(spec, dict):
            if spec.get("cdiVersion") not in VERSIONS:
                problems.append("cdiVersion %r is not a CDI version" % spec.get("cdiVersion"))
            if not KIND.match(str(spec.get("kind", ""))):
                problems.append("kind %r is not vendor/class" % spec.get("kind"))
            seen = set()
            for d in spec.get("devices") or []:
                n = str(d.get("name"))
                if not NAME.match(n):
                    problems.append("device name %r has characters CDI refuses" % n)
                if n in seen:
                    problems.append("device name %r twice" % n)
                seen.add(n)
            if not seen:
                problems.append("no devices")
    for p in problems:
        print("%s: %s" % (path, p))
    bad += bool(problems)
sys.exit(1 if bad else 0)
