// Validates the structured-output fuzz's completed outputs with Ajv (JSON Schema 2020-12):
// each must parse as JSON and satisfy its schema. Exits 1 listing the first failures.
'use strict';
const fs = require('fs');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
let total = 0, complete = 0, valid = 0;
const failures = [];
for (const line of fs.readFileSync(process.argv[2], 'utf8').split('\n')) {
  if (!line) continue;
  const c = JSON.parse(line);
  ++total;
  if (!c.complete) continue;
  ++complete;
  let value;
  try {
    value = JSON.parse(c.text);
  } catch (e) {
    failures.push(`${c.case}: does not parse (${e.message}): ${c.text}`);
    continue;
  }
  const validate = ajv.compile(c.schema);
  if (validate(value)) ++valid;
  else failures.push(`${c.case}: ${ajv.errorsText(validate.errors)}: ${c.text}\n  schema ${JSON.stringify(c.schema)}`);
}
console.log(`${total} cases, ${complete} completed, ${valid} valid against their schema (Ajv)`);
if (failures.length || complete === 0) {
  for (const f of failures.slice(0, 20)) console.log('FAIL ' + f);
  process.exit(1);
}
