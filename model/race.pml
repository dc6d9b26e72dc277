/*
 * The terminal race of the Lineup Runtime as a Promela model, checked by spin (model/README.md).
 *
 * One conversation. The Agent starts a focus period (pomodoro.start), waits for it to end, starts a
 * second one. Each period is raced by its deadline (the sweeper, or any request that reads an overdue
 * period: the same compare-and-set), the Agent's interrupt (the person leaving the workspace decides
 * the same way) and the app's close, each asked at any moment — before, at or after the end — or
 * never. Every ending goes through settle(): the compare-and-set of settle_focusing_v2 with the outbox
 * insert of queue_outbox in the same transaction, one atomic step here (the conversation's workspaces
 * row lock serializes them in Postgres). A process may die between two transactions; a restarted
 * service is a sweeper that comes round later. The database clock `now` moves on by itself.
 *
 * Each property is a named LTL formula (spin -a, then pan -N <name>). Each REVERT_* macro puts back a
 * known bug; model/check.py checks that the model holds every property and that each revert breaks
 * the property it names.
 */

#define OPS 2            /* focus periods, one after the other, in one conversation */
#define DURATION 2       /* ticks from a start to its ends_at */
#define FREE_TIME 4      /* the clock moves at any moment up to here; past it only when nothing else can */
#define MAX_TIME 12      /* a bound no run reaches (the check's deadlock search would say so) */

mtype = { idle, focusing, completed, interrupted, cancelled };

byte now;                    /* the database clock: statement_timestamp() */

mtype state[OPS];            /* idle: not started yet */
byte ends_at[OPS];
byte finalized_at[OPS];
byte terminal_writes[OPS];   /* ghost: how often a terminal state was written */
bool completed_rewritten;    /* ghost: a committed `completed` overwritten by another ending */
byte rows[OPS];              /* ghost: outbox rows of operation i's start call */

bool agent_done;
bool sweeper_done;
bool ending_done;
bool quiescent;              /* every process has finished */
bool quiescent_seen;
byte crashes = 1;            /* budget of process deaths the model explores */

#define ended(i) (state[i] != idle && state[i] != focusing)

/* One terminal state per operation, never changed once written. */
ltl terminal_once { [] (terminal_writes[0] <= 1 && terminal_writes[1] <= 1) }
/* A committed `completed` is never rewritten (to cancelled(app_closed) or anything else). */
ltl completed_kept { [] !completed_rewritten }
/* Never `completed` before ends_at, by the database clock. */
ltl never_early { [] ((state[0] != completed || finalized_at[0] >= ends_at[0]) &&
                      (state[1] != completed || finalized_at[1] >= ends_at[1])) }
/* Exactly one outbox row per start: never two, and one for every ended operation once all is done. */
ltl one_outbox_row { [] (rows[0] <= 1 && rows[1] <= 1 &&
                         (quiescent -> ((!ended(0) || rows[0] == 1) && (!ended(1) || rows[1] == 1)))) }

/* ---- the deciding transaction ------------------------------------------------------------------ */

/* The decision of settle_focusing_v2 for a row it found focusing: the deadline is a fact of the
   database clock (`completed` once ends_at has passed, whatever the caller asked for). */
inline write_terminal(i, st, clock) {
    if
    :: state[i] == completed -> completed_rewritten = true
    :: else
    fi;
    if
    :: clock >= ends_at[i] -> state[i] = completed
    :: else -> state[i] = st
    fi;
    finalized_at[i] = now;
    terminal_writes[i]++
}

inline queue_outbox(i) {
    rows[i]++
}

/* One ending of operation i asked as `st`; `due` settles only an overdue one (the sweeper). */
inline settle(i, st, due, clock) {
#if defined(REVERT_NO_STATE_GUARD)
    /* The bug: UPDATE operations SET state = ... without AND state = 'focusing' (the caller read the
       row focusing a moment ago). */
    if
    :: state[i] == focusing && (!due || clock >= ends_at[i]) ->
       atomic { write_terminal(i, st, clock); queue_outbox(i) }
    :: else
    fi
#elif defined(REVERT_OUTBOX_OUTSIDE)
    /* The bug: the outbox insert in a transaction of its own after the compare-and-set's. */
    won = false;
    atomic {
        if
        :: state[i] == focusing && (!due || clock >= ends_at[i]) -> write_terminal(i, st, clock); won = true
        :: else
        fi
    }
    if
    :: atomic { won && crashes > 0 -> crashes-- }   /* the process dies between its two transactions */
    :: won -> atomic { queue_outbox(i) }
    :: else
    fi
#else
    atomic {
        if
        :: state[i] == focusing && (!due || clock >= ends_at[i]) -> write_terminal(i, st, clock); queue_outbox(i)
        :: else
        fi
    }
#endif
}

/* ---- the processes ----------------------------------------------------------------------------- */

/* The database clock. Up to FREE_TIME it moves between any two steps (a request or the sweeper can
   be as slow as it likes); past it only when nothing else can move (`timeout`), so every run ends. */
proctype clock() {
end:
    do
    :: atomic { now < FREE_TIME && !quiescent -> now++ }
    :: atomic { timeout && !quiescent && now < MAX_TIME -> now++ }
    od
}

/* The Agent: pomodoro.start (refused while one is focusing: the partial unique index), twice. */
proctype agent() {
    byte i = 0;
    do
    :: i < OPS ->
       atomic { state[i] = focusing; ends_at[i] = now + DURATION };
       (state[i] != focusing);
       i++
    :: else -> break
    od;
    agent_done = true
}

/* The sweeper (settle_due, FOR UPDATE OF workspaces SKIP LOCKED) and any request that settles an
   overdue period first (settle_if_overdue): the same compare-and-set, only for a due period. A
   restarted service is a sweeper that comes round later. */
proctype sweeper() {
    bool won;
    do
    :: agent_done && state[0] != focusing && state[1] != focusing -> break
#ifdef REVERT_HOST_CLOCK
    /* The bug: the sweeper decides by its own host's clock, a tick ahead of the database's. */
    :: state[0] == focusing && now + 1 >= ends_at[0] -> settle(0, completed, true, now + 1)
    :: state[1] == focusing && now + 1 >= ends_at[1] -> settle(1, completed, true, now + 1)
#else
    :: state[0] == focusing && now >= ends_at[0] -> settle(0, completed, true, now)
    :: state[1] == focusing && now >= ends_at[1] -> settle(1, completed, true, now)
#endif
    od;
    sweeper_done = true
}

/* The Agent's pomodoro.interrupt (the person leaving the workspace decides the same way) and the
   app's close: each period is asked to end up to twice, each time either way, at any moment —
   before, at or after its end — or never. */
proctype ending() {
    bool won;
    byte i = 0;
    byte asked;
    mtype st;
    do
    :: i < OPS ->
       (state[i] != idle);
       asked = 0;
       do
       :: asked < 2 -> asked++;
          if
          :: st = interrupted
          :: st = cancelled
          fi;
          settle(i, st, false, now)
       :: (ended(i)) -> break
       od;
       (ended(i));
       i++
    :: else -> break
    od;
    ending_done = true
}

init {
    atomic {
        state[0] = idle; state[1] = idle;
        run clock();
        run agent();
        run sweeper();
        run ending()
    }
    (agent_done && sweeper_done && ending_done);   /* (_nr_pr counts a never claim too) */
    quiescent = true;
    /* One more step, so that the properties see the state where all is done. */
    quiescent_seen = true
}
