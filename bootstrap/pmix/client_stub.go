//go:build !cgo

package pmix

import "context"

const available = false

func join(context.Context) (*Client, error) { return nil, ErrNotBuilt }

func (c *Client) exchange(context.Context, string, string) ([]string, error) {
	return nil, ErrNotBuilt
}

func (c *Client) finalize() error { return nil }
