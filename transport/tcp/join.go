package tcp

import "context"

// Exchanger publishes this rank's address and returns every rank's address,
// indexed by rank: bootstrap.Bootstrap's Exchange method.
type Exchanger func(ctx context.Context, addr string) ([]string, error)

// Join listens with cfg, publishes the listening address through exchange
// and sets the peers it returns. On error the transport is closed.
func Join(ctx context.Context, cfg Config, exchange Exchanger) (*Transport, error) {
	tr, err := Listen(cfg)
	if err != nil {
		return nil, err
	}
	addrs, err := exchange(ctx, tr.Addr())
	if err == nil {
		err = tr.SetPeers(addrs)
	}
	if err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}
