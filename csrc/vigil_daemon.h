/*
 * vigil_daemon.h — attach to the node's stand-alone detector (libvigil).
 *
 * Instead of running a detector inside the process (VIGIL_MODE_RING or
 * VIGIL_MODE_SPORADIC of vigil.h), a process may attach to the detector
 * process of its node, `vigil daemon` (seed 003's node-level mode, seed
 * 004's stand-alone detector). The daemons run the observation ring and the
 * propagation between nodes; each watches the processes of its own node
 * (their end through a pidfd; their hangs through a heartbeat word in
 * shared memory that libvigil bumps every h from a thread of its own) and
 * tells them every failure over a Unix socket.
 *
 * After vigil_init_daemon, the rest of vigil.h works as in ring mode:
 * vigil_start starts delivering events (callback thread and vigil_poll),
 * vigil_dead_set / vigil_is_dead answer from them, vigil_leave tells the
 * daemon this process departs cleanly (its end is then reported as
 * VIGIL_EVENT_LEFT), vigil_finalize detaches. vigil_probe is not available
 * (VIGIL_ERR_STATE). In events, `detector` is the node index of the daemon
 * that observed the failure. A node's failure is reported as one
 * VIGIL_EVENT_FAILED per process it hosted; a hung process (stopped, or
 * heartbeat word not moving for the daemon's hang time-out) is reported
 * VIGIL_EVENT_FAILED, and killed by its daemon.
 */
#ifndef VIGIL_DAEMON_H
#define VIGIL_DAEMON_H

#include "vigil.h"

#ifdef __cplusplus
extern "C" {
#endif

/* VIGIL_MODE_DAEMON is the mode of an instance made by vigil_init_daemon. */
#define VIGIL_MODE_DAEMON 2

#ifndef VIGIL_NO_PROTOTYPES
/*
 * vigil_init_daemon attaches this process, as `rank`, to the daemon
 * listening on socket_path; NULL means $VIGIL_DAEMON_SOCK. In the path,
 * "{node}" is replaced by rank / $VIGIL_DAEMON_PPN (for several "nodes"
 * on one machine). The daemon checks that it hosts `rank` and identifies
 * the process by its kernel credentials. The job's size is the daemon's
 * (nodes × processes per node). The environment is read as the process
 * started (a later setenv from C is not seen). Returns VIGIL_OK, VIGIL_ERR_STATE (already
 * initialized), VIGIL_ERR_INVALID (no path, bad VIGIL_DAEMON_PPN) or
 * VIGIL_ERR_BOOTSTRAP (no daemon there, or it refused; see
 * vigil_last_error). Thread-safe like vigil_init.
 */
int vigil_init_daemon(const char *socket_path, uint32_t rank);
#endif

#ifdef __cplusplus
}
#endif

#endif
