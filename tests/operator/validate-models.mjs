// Validates a JSON list of Kubernetes objects with kubernetes-models (Kubernetes' own OpenAPI
// schemas). Exit 1 naming each invalid object and the reason.
// Usage: node validate-models.mjs OBJECTS.json NODE_MODULES_DIR
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const objs = JSON.parse(readFileSync(process.argv[2], "utf8"));
const root = `${process.argv[3]}/kubernetes-models`;
let bad = 0;
for (const o of objs) {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  const file = group ? `${root}/${group}/${version}/${o.kind}.js` : `${root}/v1/${o.kind}.js`;
  const path = pathToFileURL(file).href;
  let Model;
  try {
    Model = (await import(path))[o.kind];
  } catch (e) {
    console.log(`FAIL ${o.kind} ${o.metadata.name}: no schema for ${o.apiVersion} (${e.message})`);
    bad++;
    continue;
  }
  try {
    new Model(o).validate();
    console.log(`ok   ${o.apiVersion} ${o.kind} ${o.metadata.name}`);
  } catch (e) {
    console.log(`FAIL ${o.kind} ${o.metadata.name}: ${e.message}`);
    bad++;
  }
}
console.log(`${objs.length - bad} valid, ${bad} invalid`);
process.exit(bad ? 1 : 0);
