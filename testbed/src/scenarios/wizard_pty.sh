# A person at a terminal, for the wizard-pty scenario: a program runs in a
# tmux pane of a given size, and these functions read its screen
# (capture-pane) and press keys (send-keys), the way someone at the
# keyboard would. Sourced by the scenario's job; bash, `set -eu`.
#
#   term_start COLS ROWS COMMAND   start COMMAND in its own tmux server
#                                   ($SCREEN_RUN names this run's files)
#   wait_for TEXT [SECONDS]         until TEXT is on the screen or in its scrollback
#   wait_any SECONDS TEXT...        until one of them shows; prints which
#   select_item TEXT                move the highlight to the item showing TEXT, Enter
#   press KEY...                    keys as tmux names them: Enter, Down, C-c, Escape
#   type_text TEXT                  literal typing
#   snap NAME                       save the visible screen as NN-NAME.screen.txt
#   wait_exit [SECONDS]             until the program exits; prints its status
#   cursor_left                     "shown" or "hidden": how the program left the cursor
#   term_stop                       save the whole scrollback as a transcript
#
# Screens go to $SCREENS (a folder in the host share), so the host can
# assert on their wording and a reviewer can read them.

: "${SCREENS:?SCREENS must name the folder for the captured screens}"
mkdir -p "$SCREENS"
SCREEN_RUN=${SCREEN_RUN:-run}
# Its own server socket: nothing else in the guest can interfere.
TERM_SOCKET=wizard-pty
TERM_PANE=wizard
screen_number=0

tmux_() { tmux -u -L "$TERM_SOCKET" "$@"; }

term_start() {
    local cols=$1 rows=$2 command=$3 conf
    conf=$(mktemp)
    # remain-on-exit keeps the pane, its last screen and exit status after
    # the program has gone; the long history keeps the plan readable.
    cat >"$conf" <<'EOF'
set -g remain-on-exit on
set -g history-limit 20000
set -g default-terminal xterm-256color
set -g status off
EOF
    raw="$SCREENS/$SCREEN_RUN.raw"
    exit_status="$SCREENS/$SCREEN_RUN.status"
    rm -f "$exit_status"
    # The pane waits for a go, so that the raw output is recorded from the
    # program's first byte (pipe-pane attaches after the pane exists). Its
    # shell writes the exit status down: tmux's own #{pane_dead_status}
    # stayed empty in the guest. A UTF-8 locale, as a desktop terminal or an
    # SSH session has: the prompts' markers are not ASCII.
    LANG=C.UTF-8 tmux_ -f "$conf" new-session -d -s "$TERM_PANE" -x "$cols" -y "$rows" \
        "tmux wait-for go-$TERM_PANE; $command; echo \$? >'$exit_status'"
    rm -f "$conf"
    : >"$raw"
    tmux_ pipe-pane -t "$TERM_PANE" "cat >>'$raw'"
    tmux_ wait-for -S "go-$TERM_PANE"
}

# The visible screen.
visible() { tmux_ capture-pane -p -t "$TERM_PANE"; }
# Everything since the start, wrapped lines joined.
everything() { tmux_ capture-pane -p -J -S - -E - -t "$TERM_PANE"; }

snap() {
    screen_number=$((screen_number + 1))
    visible >"$SCREENS/$SCREEN_RUN-$(printf %02d "$screen_number")-$1.screen.txt"
}

# Fails the job (after saving what was on the screen) when TEXT does not
# show up in time: the program is stuck or says something else.
wait_for() {
    local text=$1 seconds=${2:-60}
    local deadline=$((SECONDS + seconds))
    until everything | grep -qF -- "$text"; do
        if ((SECONDS >= deadline)); then
            snap "timeout"
            echo "waited ${seconds} s for \"$text\"; the screen:" >&2
            everything | tail -n 40 >&2
            return 1
        fi
        sleep 0.5
    done
}

wait_any() {
    local seconds=$1 text
    shift
    local deadline=$((SECONDS + seconds)) screen
    while true; do
        screen=$(everything)
        for text in "$@"; do
            if grep -qF -- "$text" <<<"$screen"; then
                echo "$text"
                return 0
            fi
        done
        if ((SECONDS >= deadline)); then
            snap "timeout"
            echo "waited ${seconds} s for any of: $*; the screen:" >&2
            tail -n 40 <<<"$screen" >&2
            return 1
        fi
        sleep 0.5
    done
}

press() {
    local key
    for key in "$@"; do
        tmux_ send-keys -t "$TERM_PANE" "$key"
        # Nobody types faster than the prompt redraws, least of all on an
        # emulated CPU.
        sleep 0.5
    done
}

type_text() {
    tmux_ send-keys -t "$TERM_PANE" -l -- "$1"
    sleep 0.5
}

# The line the list's highlight is on: dialoguer's colorful theme marks it
# with "❯" (the prompt line itself starts with "?").
highlighted() { visible | grep -m1 '^ *❯' || true; }

select_item() {
    local text=$1 tries=0 line
    while true; do
        line=$(highlighted)
        if grep -qF -- "$text" <<<"$line"; then
            press Enter
            return 0
        fi
        tries=$((tries + 1))
        if ((tries > 8)); then
            snap "no-such-item"
            echo "no item showing \"$text\" in the list; the screen:" >&2
            visible >&2
            return 1
        fi
        press Down
    done
}

# Prints the program's exit status (128+N when signal N ended it).
wait_exit() {
    local seconds=${1:-60}
    local deadline=$((SECONDS + seconds))
    until [[ -s $exit_status ]]; do
        if ((SECONDS >= deadline)); then
            snap "still-running"
            echo "the program has not ended after ${seconds} s; the screen:" >&2
            visible >&2
            return 1
        fi
        sleep 0.5
    done
    cat "$exit_status"
}

# The last cursor switch the program wrote. tmux's own cursor flag cannot
# tell: it hides the cursor of a pane whose program has exited.
cursor_left() {
    case $(grep -aoE $'\e\\[\\?25[hl]' "$raw" | tail -n 1) in
        *l) echo hidden ;;
        *) echo shown ;;
    esac
}

term_stop() {
    everything >"$SCREENS/$SCREEN_RUN.transcript.txt"
    tmux_ kill-server
}
