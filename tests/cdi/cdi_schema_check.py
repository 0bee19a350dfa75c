#!/usr/bin/python3
# Cross-check: every spec of the CDI test corpus that src/edge/cdi accepts (tests/fuzz/cdi/corpus,
# all but bad-*) validates against the CDI JSON schema (../shared/reference/upstream/
# cdi_schema_schema.json, which $refs cdi_schema_defs.json as defs.json). The validator itself is
# checked first on a spec the schema must refuse. Skips (77) without ../shared (GPUOP_SHARED) or
# without python3-jsonschema / python3-yaml.
import json
import os
import sys

shared = os.environ.get('GPUOP_SHARED', '')
up = os.path.join(shared, 'reference', 'upstream')
schema_path = os.path.join(up, 'cdi_schema_schema.json')
defs_path = os.path.join(up, 'cdi_schema_defs.json')
if not shared or not os.path.exists(schema_path) or not os.path.exists(defs_path):
    print(f'no CDI schema under GPUOP_SHARED ({shared or "unset"}): skipping')
    sys.exit(77)
try:
    import jsonschema
    import yaml
except ImportError as ex:
    print(f'{ex.name} missing (python3-jsonschema, python3-yaml): skipping')
    sys.exit(77)

schema = json.load(open(schema_path))
defs = json.load(open(defs_path))
try:  # jsonschema >= 4.18: the referencing registry
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7
    registry = Registry().with_resource('defs.json', Resource.from_contents(
        defs, default_specification=DRAFT7))
    validator = jsonschema.Draft7Validator(schema, registry=registry)
except ImportError:  # Debian 12's 4.10: a resolver with the store
    resolver = jsonschema.RefResolver('', schema, store={'defs.json': defs})
    validator = jsonschema.Draft7Validator(schema, resolver=resolver)


def errors(doc):
    return [f'{"/".join(str(p) for p in e.absolute_path)}: {e.message}'
            for e in validator.iter_errors(doc)]


# The validator must be able to fail: a device node without a path, a spec without devices.
must_fail = {'cdiVersion': '0.5.0', 'kind': 'a.com/b',
             'devices': [{'name': 'x', 'containerEdits': {'deviceNodes': [{'major': 1}]}}]}
if not errors(must_fail) or not errors({'cdiVersion': '0.5.0', 'kind': 'a.com/b'}):
    print('FAIL: the schema accepts specs it must refuse: the $refs did not resolve')
    sys.exit(1)

corpus = os.path.join(os.environ['GPUOP_SOURCE_ROOT'], 'tests', 'fuzz', 'cdi', 'corpus')
failed = 0
checked = 0
for name in sorted(os.listdir(corpus)):
    if name.startswith('bad-'):
        continue
    text = open(os.path.join(corpus, name)).read()
    doc = json.loads(text) if name.endswith('.json') else yaml.safe_load(text)
    errs = errors(doc)
    checked += 1
    for e in errs:
        print(f'FAIL: {name}: {e}')
    failed += bool(errs)
print(f'{checked} specs checked against the CDI schema, {failed} failed')
sys.exit(1 if failed or not checked else 0)
