#!/bin/sh
# ccbench_command_line.sh — the command line ccbench quotes in a results
# README is the whole command, and one a shell runs again as it was given:
#
#   ccbench_command_line.sh CCBENCH WORKDIR
#
# 1. a command line longer than 4 KiB (an --out path of ~3,600 bytes, then
#    `--seed 7` sixty times and one more option): every argument is in the
#    README, the last included;
# 2. arguments with a space, a single quote, a dollar sign and backticks, and
#    an empty one: quoted so that a shell splits the line back into the same
#    arguments (the empty one as ''), inside a markdown code span whose fence
#    outgrows the backticks;
# 3. an argument with a tab and a byte that is not UTF-8: shown escaped, and
#    the line said not to be runnable as written.
# Needs only a POSIX shell, grep and sed.
set -u
ccbench=$1 work=$2
rm -rf "$work"
mkdir -p "$work" || exit 1
fail=0

# 1. long: 36 directory levels of 100 bytes each
deep=$work
i=0
while [ $i -lt 36 ]; do
    deep=$deep/$(printf '%0100d' $i)
    i=$((i + 1))
done
seeds=
i=0
while [ $i -lt 60 ]; do
    seeds="$seeds --seed 7"
    i=$((i + 1))
done
# shellcheck disable=SC2086 # $seeds: sixty words on purpose
if ! "$ccbench" replay -s ccalloc-growth --reps 1 --out "$deep" gen:uniform $seeds --device-bytes 8G >"$work/out1" 2>&1; then
    cat "$work/out1"
    echo "FAIL: the long command line did not run"
    fail=1
fi
line=$(grep '^- command: ' "$deep/README.md")
case $line in
*"gen:uniform$seeds --device-bytes 8G\`") ;;
*)
    echo "FAIL: the README's command line lost its end (${#line} bytes): ...$(printf '%s' "$line" | tail -c 120)"
    fail=1
    ;;
esac

# 2. quoting: the README's line, run through sh, gives back the same arguments
odd="$work/with space/it's \$HOME \`\`x"
if ! "$ccbench" replay -s ccalloc-growth --reps 1 --no-plots --scripts '' --out "$odd" gen:uniform >"$work/out2" 2>&1; then
    cat "$work/out2"
    echo "FAIL: the command line with odd characters did not run"
    fail=1
fi
quoted=$(sed -n 's/^- command: ``` \(.*\) ```$/\1/p' "$odd/README.md")
args=$(eval "set -- $quoted; shift; for a in \"\$@\"; do printf '[%s]' \"\$a\"; done")
want="[replay][-s][ccalloc-growth][--reps][1][--no-plots][--scripts][][--out][$odd][gen:uniform]"
if [ "$args" != "$want" ]; then
    echo "FAIL: the README's command line ($quoted) splits into"
    echo "  $args"
    echo "want"
    echo "  $want"
    fail=1
fi
# 3. an argument the README can only show escaped (a tab, a byte that is not
#    UTF-8: written \xNN, so the line pasted would name another directory):
#    the README says that its line does not run as written
tab=$(printf '\t') ff=$(printf '\377')
esc="$work/a${tab}b${ff}c"
if ! "$ccbench" replay -s ccalloc-growth --reps 1 --out "$esc" gen:uniform >"$work/out3" 2>&1; then
    cat "$work/out3"
    echo "FAIL: the command line with control bytes did not run"
    fail=1
fi
if ! grep -a '^- command: ' "$esc/README.md" | grep -F "'" | grep -F 'a\x09b\xffc' | grep -qF 'not runnable as written'; then
    echo "FAIL: the README's escaped command line is not said to differ from the command:"
    grep -a '^- command: ' "$esc/README.md"
    fail=1
fi
[ $fail -eq 0 ] && echo "ccbench_command_line: ok"
exit $fail
