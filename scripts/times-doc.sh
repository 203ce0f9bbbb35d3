#!/usr/bin/env bash
# Rewrites the Times section of docs/testbed/times.md from the time table of a
# `scripts/test.sh` run, so the figures there are always a real run's:
#
#   scripts/times-doc.sh [TIMES.tsv]     default: target/test-times.tsv
#
# The table goes between the two `times:` marker comments of the section;
# the text around them is kept.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tsv=${1:-${CARGO_TARGET_DIR:-target}/test-times.tsv}
doc=docs/testbed/times.md
[[ -s $tsv ]] || { echo "times-doc: no time table at $tsv: run scripts/test.sh first" >&2; exit 1; }
grep -q '^<!-- times:begin' "$doc" && grep -q '^<!-- times:end' "$doc" ||
    { echo "times-doc: $doc lacks the times:begin/times:end markers" >&2; exit 1; }

table=$(mktemp)
trap 'rm -f "$table"' EXIT
{
    # The run's own header line: "# when, commit, machine, mode".
    header=$(sed -n 's/^# //p' "$tsv" | head -1)
    echo "One run of \`scripts/test.sh\`: ${header:-no header recorded}."
    echo "Scenarios marked \\* ran beside another one (\`PI_TESTBED_JOBS\`)."
    echo
    echo "Wall seconds, and the CPU seconds of the step (of a scenario: its guests' QEMU processes)."
    echo
    echo "| phase | wall s | CPU s | result |"
    echo "| --- | ---: | ---: | --- |"
    grep -v '^#' "$tsv" | awk -F'\t' '{
        name = $1; sub(/^ +/, "", name)
        if ($1 ~ /^ +/) name = "&nbsp;&nbsp;" name
        gsub(/\*/, "\\*", name)
        printf "| %s | %s | %s | %s |\n", name, $2, ($4 == "" ? "-" : $4), $3
    }'
} >"$table"

awk -v table="$table" '
    /^<!-- times:begin/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
    /^<!-- times:end/ { skip = 0 }
    !skip { print }
' "$doc" >"$doc.new"
mv "$doc.new" "$doc"
echo "times-doc: $doc updated from $tsv"
# README's line on how long the demo and the test run take is generated
# from this table (xtask/src/docgen.rs): bring it along.
cargo xtask write-docs
