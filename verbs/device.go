package verbs

/*
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/Mellanox/rdmamap"
)

// SysfsClass is where the kernel describes RDMA devices.
const SysfsClass = "/sys/class/infiniband"

// DeviceInfo describes one RDMA device as ibv_get_device_list sees it.
type DeviceInfo struct {
	// Name is the kernel name (rxe0, mlx5_0).
	Name string
	// GUID is the node GUID in host byte order (ibv_get_device_guid).
	GUID uint64
	// Netdevs lists the network devices whose addresses populate the
	// device's GID tables (RoCE), from sysfs gid_attrs/ndevs.
	Netdevs []string
}

// Devices lists the RDMA devices of the system (ibv_get_device_list). It
// returns ErrNoDevice when there is none.
func Devices() ([]DeviceInfo, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		// No kernel support (no uverbs ABI) reads as ENOSYS or ENOENT.
		if en := errnoOf(err); en != 0 && en != int(syscall.ENOSYS) && en != int(syscall.ENOENT) {
			return nil, newError("ibv_get_device_list", en)
		}
		return nil, ErrNoDevice
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	out := make([]DeviceInfo, 0, len(devs))
	for _, d := range devs {
		name := C.GoString(C.ibv_get_device_name(d))
		guid := uint64(C.ibv_get_device_guid(d))
		// ibv_get_device_guid returns network byte order (big endian).
		guid = be64(guid)
		out = append(out, DeviceInfo{Name: name, GUID: guid, Netdevs: netdevsOf(name)})
	}
	if len(out) == 0 {
		return nil, ErrNoDevice
	}
	return out, nil
}

// be64 converts a big-endian 64-bit value read as host order.
func be64(v uint64) uint64 {
	var b [8]byte
	*(*uint64)(unsafe.Pointer(&b[0])) = v
	var r uint64
	for _, x := range b {
		r = r<<8 | uint64(x)
	}
	return r
}

// DeviceForNetdev returns the RDMA device that carries RoCE traffic for the
// network device netdev (github.com/Mellanox/rdmamap).
func DeviceForNetdev(netdev string) (string, error) {
	if len(rdmamap.GetRdmaDeviceList()) == 0 {
		return "", ErrNoDevice
	}
	dev, err := rdmamap.GetRdmaDeviceForNetdevice(netdev)
	if err != nil {
		return "", fmt.Errorf("verbs: no RDMA device for netdev %s: %w", netdev, err)
	}
	if dev == "" {
		return "", fmt.Errorf("verbs: no RDMA device for netdev %s", netdev)
	}
	return dev, nil
}

// NetdevsForDevice returns the network devices behind an RDMA device's GID
// tables (all ports), from sysfs gid_attrs/ndevs.
func NetdevsForDevice(dev string) []string { return netdevsOf(dev) }

func netdevsOf(dev string) []string {
	seen := map[string]bool{}
	var out []string
	for _, port := range rdmamap.GetPorts(dev) {
		dir := filepath.Join(SysfsClass, dev, "ports", port, "gid_attrs", "ndevs")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue // unused entries read as EINVAL
			}
			nd := strings.TrimSpace(string(b))
			if nd != "" && !seen[nd] {
				seen[nd] = true
				out = append(out, nd)
			}
		}
	}
	return out
}

// GID is a 128-bit port address; for RoCE it holds an IPv6 or IPv4-mapped
// address of the netdev.
type GID [16]byte

// IP returns the GID as an IP address (IPv4 for an IPv4-mapped GID).
func (g GID) IP() net.IP { return net.IP(g[:]) }

// IsZero reports an empty GID table entry.
func (g GID) IsZero() bool { return g == GID{} }

// String formats the GID as an IP address.
func (g GID) String() string { return g.IP().String() }

// GIDType is the RoCE flavour of a GID table entry.
type GIDType string

// GID types as sysfs gid_attrs/types reports them.
const (
	GIDTypeIB     GIDType = "IB/RoCE v1"
	GIDTypeRoCEv2 GIDType = "RoCE v2"
)

// GIDEntry is one populated GID table entry.
type GIDEntry struct {
	Index  int     // index in the port's GID table
	GID    GID     // the GID itself
	Type   GIDType // from sysfs gid_attrs/types/<index>
	Netdev string  // from sysfs gid_attrs/ndevs/<index> ("" on InfiniBand)
}

// gidAttr reads sysfs gid_attrs/<kind>/<index>; unused entries fail with
// EINVAL and read as "".
func gidAttr(dev string, port int, kind string, index int) string {
	b, err := os.ReadFile(filepath.Join(SysfsClass, dev, "ports", strconv.Itoa(port),
		"gid_attrs", kind, strconv.Itoa(index)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// gidScore ranks entries for PreferredGID: RoCE v2 with an IPv4-mapped
// address, then RoCE v2 global IPv6, RoCE v2 link-local, then the rest.
func gidScore(e GIDEntry) int {
	s := 0
	if e.Type == GIDTypeRoCEv2 {
		s = 10
	}
	ip := e.GID.IP()
	switch {
	case ip.To4() != nil:
		s += 3
	case !ip.IsLinkLocalUnicast():
		s += 2
	default:
		s++
	}
	return s
}
