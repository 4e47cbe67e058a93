// Package limit bounds what an outsider can make a Vigil process spend
// through the sockets it listens on: log lines (Log: one line per reason
// per interval, with a count of the lines suppressed), accept loops that
// back off when the process is out of file descriptors instead of spinning
// (Accept), and listeners that cap the connections open at once (Cap).
package limit
