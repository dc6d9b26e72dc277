/*
 * The outbox and the relay of the Lineup Runtime as a Promela model, checked by spin
 * (model/README.md).
 *
 * One conversation's outbox receives two rows, one after the other, in sequence order (queue_outbox,
 * in the transactions that decide). Two relays deliver them to the Agent: the claim under a lease
 * (relay_claim_local: the head of the conversation's pending queue, due, under no live lease,
 * FOR UPDATE SKIP LOCKED: one atomic step here), the POST, and the outcome fenced by the very lease
 * it claimed (relay_record_local: `delivered`, or back to pending with a backoff; `lease_lost` when
 * another relay owns the row now). A relay may crash between its POST and its outcome; a POST may
 * fail, or time out (the HTTP client's timeout, counted from the claim). The database clock `now`
 * moves on by itself.
 *
 * Each property is a named LTL formula (spin -a, then pan -N <name>). Each REVERT_* macro puts back a
 * known bug; model/check.py checks that the model holds every property and that each revert breaks
 * the property it names.
 */

#define ROWS 2
#define FREE_TIME 4      /* the clock moves at any moment up to here; past it only when nothing else can */
#define MAX_TIME 16      /* a bound no run reaches (the check's deadlock search would say so) */
#define POST_TIMEOUT 1   /* a POST ends, arrived or not, within this many ticks of its claim */
#ifdef REVERT_SHORT_LEASE
#define LEASE 1          /* the bug: a lease no longer than a delivery */
#else
#define LEASE 2          /* the lease outlives the POST it covers: max(30 s, 3 x RELAY_TIMEOUT_SECONDS) */
#endif
#define NONE 255

mtype = { absent, pending, delivered };

byte now;                    /* the database clock: now() */

mtype status[ROWS];          /* absent: not inserted yet */
byte lease_owner[ROWS];      /* 0: none; else the relay's number */
byte lease_expires[ROWS];
byte next_attempt[ROWS];

byte senders[ROWS];          /* ghost: relays POSTing row i right now */
bool posting[3];             /* relay r's POST is in flight ... */
byte post_deadline[3];       /* ... and is over (arrived, failed or timed out) by this time */
bool received[ROWS];         /* the Agent has received row i (its event_id), at least once */
byte newest;                 /* 1 + the highest sequence the Agent has received (0: none) */
bool order_broken;           /* ghost: a row arrived after a later row of its conversation */

bool produced;
bool relays_done[3];
bool quiescent;
bool quiescent_seen;
byte crashes = 1;            /* budget of relay crashes the model explores */
#ifdef REVERT_CLAIM_WITHOUT_FLUSH
byte lost_claims = 1;        /* budget of claims a database crash undoes */
#endif
byte failures = 1;           /* budget of failed POSTs */

#define all_delivered (status[0] == delivered && status[1] == delivered)

/* At least once: once all is done every row was delivered, and none is marked delivered unless the
   Agent received it (under the row's event_id, stable across attempts: what the Agent drops repeats by). */
ltl at_least_once { [] ((quiescent -> all_delivered) &&
                        (status[0] != delivered || received[0]) &&
                        (status[1] != delivered || received[1])) }
/* Per-conversation order: no row reaches the Agent after a later row of its conversation did. */
ltl conversation_order { [] !order_broken }
/* One sender at a time: a row is in flight from at most one relay (the claim's exclusivity). */
ltl one_sender { [] (senders[0] <= 1 && senders[1] <= 1) }

/* The database clock. Up to FREE_TIME it moves between any two steps (a relay can be as slow as it
   likes); past it only when nothing else can move (`timeout`), so every run ends. It never passes a
   POST's timeout while that POST is unanswered: the HTTP client ends it. */
#define posts_due ((posting[1] && post_deadline[1] <= now) || (posting[2] && post_deadline[2] <= now))
proctype clock() {
end:
    do
    :: atomic { now < FREE_TIME && !quiescent && !posts_due -> now++ }
    :: atomic { timeout && !quiescent && now < MAX_TIME -> now++ }
    od
}

/* The deciding transactions' queue_outbox: row 0, then row 1 (the conversation's next sequence). */
proctype producer() {
    atomic { status[0] = pending; next_attempt[0] = now };
    atomic { status[1] = pending; next_attempt[1] = now };
    produced = true
}

#define claimable(i) (status[i] == pending && next_attempt[i] <= now && \
                      (lease_owner[i] == 0 || lease_expires[i] <= now))
/* The head of the conversation's pending queue: no earlier row still pending. */
#define head(i) (i == 0 || status[0] != pending)

/* The claim; the relay starts the POST of what it claimed as the claim returns (relay/claimer.py,
   _start_delivery), and the HTTP client's deadline counts from there: one step here. The lease
   (max(30 s, 3 x RELAY_TIMEOUT_SECONDS)) covers that deadline with room to spare. */
inline lease_and_post(me, r, lease) {
    lease_owner[r] = me;
    lease_expires[r] = now + LEASE;
    lease = lease_expires[r];
    senders[r]++;
    posting[me] = true;
    post_deadline[me] = now + POST_TIMEOUT
}

inline claim(me, r, lease) {
#ifdef REVERT_CLAIM_NOT_EXCLUSIVE
    /* The bug: the claim reads a claimable row, then leases it in another statement (no FOR UPDATE
       ... SKIP LOCKED): two relays can both take it. */
    if
    :: claimable(0) -> r = 0
    :: claimable(1) && head(1) -> r = 1
    :: else -> r = NONE
    fi;
    if
    :: r != NONE -> atomic { lease_and_post(me, r, lease) }
    :: else
    fi
#else
    atomic {
        if
        :: claimable(0) -> r = 0
        :: claimable(1) && head(1) -> r = 1
        :: else -> r = NONE
        fi;
        if
        :: r != NONE -> lease_and_post(me, r, lease)
        :: else
        fi
    }
#endif
}

/* The Agent's endpoint receives row r. */
inline receive(r) {
    if
    :: newest > r + 1 -> order_broken = true
    :: else
    fi;
    if
    :: newest < r + 1 -> newest = r + 1
    :: else
    fi;
    received[r] = true
}

/* relay_record_local: the outcome lands only while this relay holds the very lease it claimed. */
inline record(me, r, lease, ok) {
    if
    :: status[r] == pending && lease_owner[r] == me && lease_expires[r] == lease && lease > now ->
       if
       :: ok -> status[r] = delivered
       :: else -> next_attempt[r] = now + 1       /* retried after a backoff */
       fi;
       lease_owner[r] = 0
    :: else                                       /* lease_lost: another relay owns the row now */
    fi
}

proctype relay(byte me) {
    byte r;
    byte lease;
    bool ok;
    do
    :: produced && all_delivered -> break
    :: else ->
       claim(me, r, lease);
       if
       :: r == NONE ->    /* wait for a row to become claimable */
          ((produced && all_delivered) || claimable(0) || (claimable(1) && head(1)))
       :: else ->
#ifdef REVERT_CLAIM_WITHOUT_FLUSH
          /* The bug: the claim commits without waiting for its WAL flush (synchronous_commit = off),
             and Postgres crashes before the flush: it comes back without the claim (the row as
             before it: pending, no lease), the POST already on its way. */
          if
          :: atomic { lost_claims > 0 -> lost_claims--; lease_owner[r] = 0; lease_expires[r] = 0 }
          :: skip
          fi;
#endif
          /* The POST: it arrives, or fails, or times out at its deadline. */
          if
          :: atomic { now <= post_deadline[me] -> receive(r); ok = true; senders[r]--; posting[me] = false }
          :: atomic { now <= post_deadline[me] && failures > 0 -> failures--; ok = false; senders[r]--; posting[me] = false }
          :: atomic { now >= post_deadline[me] -> ok = false; senders[r]--; posting[me] = false }
          fi;
          if
          :: atomic { crashes > 0 -> crashes-- }  /* crashed before recording: the lease runs out */
          :: atomic { record(me, r, lease, ok) }
          fi
       fi
    od;
    relays_done[me] = true
}

init {
    atomic {
        run clock();
        run producer();
        run relay(1);
        run relay(2)
    }
    (produced && relays_done[1] && relays_done[2]);   /* (_nr_pr counts a never claim too) */
    quiescent = true;
    /* One more step, so that the properties see the state where all is done. */
    quiescent_seen = true
}
