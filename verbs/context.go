package verbs

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resource is a verbs object the Context tracks; destroy frees it once.
type resource interface {
	destroy() error
}

// Context is an open RDMA device (ibv_context) and the owner of every object
// made from it.
type Context struct {
	ctx  *C.struct_ibv_context
	name string
	attr DeviceAttr

	mu     sync.Mutex
	objs   []resource // live objects, in creation order
	closed bool
}

// DeviceAttr holds the device limits Vigil cares about (ibv_query_device).
type DeviceAttr struct {
	PhysPortCnt int    // number of ports (numbered from 1)
	MaxQPWR     int    // deepest send or receive queue
	MaxSGE      int    // scatter/gather entries per work request
	MaxCQE      int    // entries per completion queue
	MaxMR       int    // memory regions
	MaxQP       int    // queue pairs
	MaxCQ       int    // completion queues
	MaxPD       int    // protection domains
	MaxMRSize   uint64 // bytes in one memory region
	// MemWindowType2 says the device binds type 2 memory windows (AllocMW).
	MemWindowType2 bool
}

// Open opens the RDMA device called name, or the first device if name is
// "". It returns ErrNoDevice when the system has no RDMA device.
func Open(name string) (*Context, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		if en := errnoOf(err); en != 0 && en != int(syscall.ENOSYS) && en != int(syscall.ENOENT) {
			return nil, newError("ibv_get_device_list", en)
		}
		return nil, ErrNoDevice
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	if len(devs) == 0 {
		return nil, ErrNoDevice
	}
	var dev *C.struct_ibv_device
	var names []string
	for _, d := range devs {
		dn := C.GoString(C.ibv_get_device_name(d))
		names = append(names, dn)
		if name == "" || dn == name {
			dev = d
			name = dn
			break
		}
	}
	if dev == nil {
		return nil, fmt.Errorf("verbs: no RDMA device %q (have %s)", name, strings.Join(names, ", "))
	}
	ctx, err := C.ibv_open_device(dev)
	if ctx == nil {
		return nil, newError("ibv_open_device("+name+")", errnoOf(err))
	}
	c := &Context{ctx: ctx, name: name}
	var da C.struct_vv_dev
	if rc := C.vv_query_device(ctx, &da); rc != 0 {
		C.ibv_close_device(ctx)
		return nil, newError("ibv_query_device", int(rc))
	}
	c.attr = DeviceAttr{
		PhysPortCnt: int(da.phys_port_cnt), MaxQPWR: int(da.max_qp_wr), MaxSGE: int(da.max_sge),
		MaxCQE: int(da.max_cqe), MaxMR: int(da.max_mr), MaxQP: int(da.max_qp), MaxCQ: int(da.max_cq),
		MaxPD: int(da.max_pd), MaxMRSize: uint64(da.max_mr_size), MemWindowType2: da.mw_type2 != 0,
	}
	if rc := C.vv_set_nonblock(ctx.async_fd); rc != 0 {
		C.ibv_close_device(ctx)
		return nil, newError("fcntl(async_fd, O_NONBLOCK)", int(rc))
	}
	return c, nil
}

// Name returns the device name.
func (c *Context) Name() string { return c.name }

// Attr returns the device limits read at Open.
func (c *Context) Attr() DeviceAttr { return c.attr }

// track registers a new live object.
func (c *Context) track(r resource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.objs = append(c.objs, r)
	return nil
}

// release frees one tracked object. Closing an object twice is a no-op. A
// failed destroy leaves the object tracked.
func (c *Context) release(r resource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.objs) - 1; i >= 0; i-- {
		if c.objs[i] == r {
			if err := r.destroy(); err != nil {
				return err
			}
			c.objs = append(c.objs[:i], c.objs[i+1:]...)
			return nil
		}
	}
	return nil
}

// Live returns the number of objects made from the Context and not yet
// freed: after every object's Close it is 0 (a leak check).
func (c *Context) Live() int { return c.live() }

// live returns the number of objects not yet freed (for tests and leak
// checks).
func (c *Context) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.objs)
}

// Close frees every object still open, in reverse order of creation, then
// closes the device (ibv_close_device). It returns every failure, each
// naming its verbs call.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for i := len(c.objs) - 1; i >= 0; i-- {
		if err := c.objs[i].destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	c.objs = nil
	if rc, err := C.ibv_close_device(c.ctx); rc != 0 {
		errs = append(errs, newError("ibv_close_device", errnoOf(err)))
	}
	c.ctx = nil
	return errors.Join(errs...)
}

// PortState is an ibv_port_state.
type PortState int

// Port states.
const (
	PortDown   PortState = C.IBV_PORT_DOWN
	PortInit   PortState = C.IBV_PORT_INIT
	PortArmed  PortState = C.IBV_PORT_ARMED
	PortActive PortState = C.IBV_PORT_ACTIVE
)

// String returns libibverbs' name of the state.
func (s PortState) String() string {
	return C.GoString(C.ibv_port_state_str(C.enum_ibv_port_state(s)))
}

// MTU is an ibv_mtu code (MTU256 .. MTU4096).
type MTU int

// Path MTUs.
const (
	MTU256  MTU = C.IBV_MTU_256
	MTU512  MTU = C.IBV_MTU_512
	MTU1024 MTU = C.IBV_MTU_1024
	MTU2048 MTU = C.IBV_MTU_2048
	MTU4096 MTU = C.IBV_MTU_4096
)

// Bytes returns the MTU in bytes (0 for an invalid code).
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << int(m)
}

// LinkLayer says whether a port is InfiniBand or Ethernet (RoCE).
type LinkLayer int

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = C.IBV_LINK_LAYER_UNSPECIFIED
	LinkLayerInfiniBand  LinkLayer = C.IBV_LINK_LAYER_INFINIBAND
	LinkLayerEthernet    LinkLayer = C.IBV_LINK_LAYER_ETHERNET
)

// String names the link layer.
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "unspecified"
}

// PortAttr is what ibv_query_port reports about one port.
type PortAttr struct {
	Port        int       // port number (1-based)
	State       PortState // PortActive when the link is up
	MaxMTU      MTU       // largest MTU the port supports
	ActiveMTU   MTU       // MTU in use (RoCE: from the netdev's MTU)
	LinkLayer   LinkLayer // InfiniBand or Ethernet (RoCE)
	GIDTableLen int       // size of the GID table, used or not
	LID         uint16    // local identifier (InfiniBand; 0 on RoCE)
}

// QueryPort reads the attributes of port (1-based).
func (c *Context) QueryPort(port int) (PortAttr, error) {
	if c.ctx == nil {
		return PortAttr{}, ErrClosed
	}
	var p C.struct_vv_port
	if rc := C.vv_query_port(c.ctx, C.int(port), &p); rc != 0 {
		return PortAttr{}, newError(fmt.Sprintf("ibv_query_port(%s, %d)", c.name, port), int(rc))
	}
	return PortAttr{
		Port: port, State: PortState(p.state), MaxMTU: MTU(p.max_mtu), ActiveMTU: MTU(p.active_mtu),
		LinkLayer: LinkLayer(p.link_layer), GIDTableLen: int(p.gid_tbl_len), LID: uint16(p.lid),
	}, nil
}

// Ports returns the attributes of every port.
func (c *Context) Ports() ([]PortAttr, error) {
	out := make([]PortAttr, 0, c.attr.PhysPortCnt)
	for p := 1; p <= c.attr.PhysPortCnt; p++ {
		a, err := c.QueryPort(p)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// GIDTable returns the populated entries of port's GID table: index and GID
// from ibv_query_gid_table (one call; ibv_query_gid per index where the
// kernel lacks it), type and netdev from sysfs gid_attrs.
func (c *Context) GIDTable(port int) ([]GIDEntry, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return nil, err
	}
	var out []GIDEntry
	add := func(i int, raw *[16]C.uint8_t) {
		var g GID
		for k := range g {
			g[k] = byte(raw[k])
		}
		if g.IsZero() {
			return
		}
		out = append(out, GIDEntry{
			Index:  i,
			GID:    g,
			Type:   GIDType(gidAttr(c.name, port, "types", i)),
			Netdev: gidAttr(c.name, port, "ndevs", i),
		})
	}
	// The table call returns every port's entries: room for all of them.
	max := pa.GIDTableLen * c.attr.PhysPortCnt
	tab := (*C.struct_vv_gid)(C.calloc(C.size_t(max), C.size_t(unsafe.Sizeof(C.struct_vv_gid{}))))
	if tab == nil {
		return nil, newError("calloc(gid table)", int(syscall.ENOMEM))
	}
	defer C.free(unsafe.Pointer(tab))
	n := C.vv_query_gid_table(c.ctx, C.int(port), tab, C.int(max))
	if n >= 0 {
		for _, e := range unsafe.Slice(tab, int(n)) {
			add(int(e.index), &e.raw)
		}
		return out, nil
	}
	if syscall.Errno(-n) != syscall.EOPNOTSUPP && syscall.Errno(-n) != syscall.ENOSYS {
		return nil, newError(fmt.Sprintf("ibv_query_gid_table(%s)", c.name), int(-n))
	}
	var raw [16]C.uint8_t
	for i := 0; i < pa.GIDTableLen; i++ {
		// Unused entries may fail (ENODATA/EINVAL) rather than read as zero.
		if rc := C.vv_query_gid(c.ctx, C.int(port), C.int(i), &raw[0]); rc == 0 {
			add(i, &raw)
		}
	}
	return out, nil
}

// PreferredGID picks the GID a QP on port should use: a RoCE v2 GID,
// IPv4-mapped first, then global IPv6, then link-local; then anything. If
// netdev is not "", only entries of that netdev qualify.
func (c *Context) PreferredGID(port int, netdev string) (GIDEntry, error) {
	tab, err := c.GIDTable(port)
	if err != nil {
		return GIDEntry{}, err
	}
	var cand []GIDEntry
	for _, e := range tab {
		if netdev == "" || e.Netdev == netdev {
			cand = append(cand, e)
		}
	}
	if len(cand) == 0 {
		return GIDEntry{}, fmt.Errorf("verbs: %s port %d has no GID (netdev %q): is the netdev up with an address?",
			c.name, port, netdev)
	}
	sort.SliceStable(cand, func(i, j int) bool { return gidScore(cand[i]) > gidScore(cand[j]) })
	return cand[0], nil
}

// AsyncEventType is an ibv_event_type.
type AsyncEventType int

// Asynchronous event types.
const (
	EventCQErr            AsyncEventType = C.IBV_EVENT_CQ_ERR
	EventQPFatal          AsyncEventType = C.IBV_EVENT_QP_FATAL
	EventQPReqErr         AsyncEventType = C.IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr      AsyncEventType = C.IBV_EVENT_QP_ACCESS_ERR
	EventCommEst          AsyncEventType = C.IBV_EVENT_COMM_EST
	EventSQDrained        AsyncEventType = C.IBV_EVENT_SQ_DRAINED
	EventPathMig          AsyncEventType = C.IBV_EVENT_PATH_MIG
	EventPathMigErr       AsyncEventType = C.IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      AsyncEventType = C.IBV_EVENT_DEVICE_FATAL
	EventPortActive       AsyncEventType = C.IBV_EVENT_PORT_ACTIVE
	EventPortErr          AsyncEventType = C.IBV_EVENT_PORT_ERR
	EventLIDChange        AsyncEventType = C.IBV_EVENT_LID_CHANGE
	EventPKeyChange       AsyncEventType = C.IBV_EVENT_PKEY_CHANGE
	EventSMChange         AsyncEventType = C.IBV_EVENT_SM_CHANGE
	EventSRQErr           AsyncEventType = C.IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  AsyncEventType = C.IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached AsyncEventType = C.IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister AsyncEventType = C.IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        AsyncEventType = C.IBV_EVENT_GID_CHANGE
	EventWQFatal          AsyncEventType = C.IBV_EVENT_WQ_FATAL
)

// String returns libibverbs' name of the event (ibv_event_type_str).
func (t AsyncEventType) String() string {
	return C.GoString(C.ibv_event_type_str(C.enum_ibv_event_type(t)))
}

// AsyncEvent is one asynchronous event of the device: a port going down or
// up, a QP or CQ entering an error state.
type AsyncEvent struct {
	Type  AsyncEventType // what happened
	QPNum uint32         // for QP events
	Port  int            // for port events
}

// String describes the event.
func (e AsyncEvent) String() string {
	switch {
	case e.QPNum != 0:
		return fmt.Sprintf("%v (qp %d)", e.Type, e.QPNum)
	case e.Port != 0:
		return fmt.Sprintf("%v (port %d)", e.Type, e.Port)
	}
	return e.Type.String()
}

// AsyncEvent waits up to timeout for the next asynchronous event
// (ibv_get_async_event, acknowledged at once). ok is false if none came. A
// negative timeout waits forever.
func (c *Context) AsyncEvent(timeout time.Duration) (ev AsyncEvent, ok bool, err error) {
	if c.ctx == nil {
		return ev, false, ErrClosed
	}
	ready, err := pollIn(int(c.ctx.async_fd), timeout)
	if err != nil || !ready {
		return ev, false, err
	}
	var a C.struct_vv_async
	if rc := C.vv_get_async_event(c.ctx, &a); rc != 0 {
		if syscall.Errno(rc) == syscall.EAGAIN {
			return ev, false, nil
		}
		return ev, false, newError("ibv_get_async_event", int(rc))
	}
	return AsyncEvent{Type: AsyncEventType(a._type), QPNum: uint32(a.qp_num), Port: int(a.port)}, true, nil
}

// AsyncFD returns the device's asynchronous event file descriptor
// (non-blocking), for a caller that waits on it together with other
// descriptors; AsyncEvent(0) then reads the events without waiting.
func (c *Context) AsyncFD() int {
	if c.ctx == nil {
		return -1
	}
	return int(c.ctx.async_fd)
}

// pollIn waits until fd is readable or timeout passes (negative: forever).
func pollIn(fd int, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		ms := -1
		if timeout >= 0 {
			left := time.Until(deadline)
			if left < 0 {
				left = 0
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, newError("poll", errnoOf(err))
		}
		if n > 0 {
			return true, nil
		}
		if timeout >= 0 && !time.Now().Before(deadline) {
			return false, nil
		}
	}
}

// PD is a protection domain (ibv_pd): memory regions, queue pairs and
// address handles of one PD can be used together.
type PD struct {
	c  *Context
	pd *C.struct_ibv_pd
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if c.ctx == nil {
		return nil, ErrClosed
	}
	pd, err := C.ibv_alloc_pd(c.ctx)
	if pd == nil {
		return nil, newError("ibv_alloc_pd", errnoOf(err))
	}
	p := &PD{c: c, pd: pd}
	if err := c.track(p); err != nil {
		C.ibv_dealloc_pd(pd)
		return nil, err
	}
	return p, nil
}

// Context returns the device context the PD belongs to.
func (p *PD) Context() *Context { return p.c }

// Close deallocates the PD (ibv_dealloc_pd); it fails with EBUSY while MRs,
// QPs or AHs of the PD remain.
func (p *PD) Close() error { return p.c.release(p) }

func (p *PD) destroy() error {
	if rc := C.ibv_dealloc_pd(p.pd); rc != 0 {
		return newError("ibv_dealloc_pd", int(rc))
	}
	return nil
}
