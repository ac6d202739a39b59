package load

import (
	"errors"
	"net"
	"strings"
	"time"
)

// ReplyError is an error reply from the server.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// do sends one command on nc and returns its reply: the text of a simple
// string, integer or bulk string, the raw RESP of an array, or a ReplyError.
func do(nc net.Conn, rd *replyReader, args ...string) (string, error) {
	b := appendCommand(nil, args)
	if _, err := nc.Write(b); err != nil {
		return "", err
	}
	reply, err := rd.nextReply()
	if err != nil {
		return "", err
	}
	line, next := lineAt(reply, 1)
	switch reply[0] {
	case '-':
		return "", ReplyError(line)
	case '+', ':':
		return string(line), nil
	case '$':
		if n, _ := atoi(line); n < 0 {
			return "", nil
		}
		return string(reply[next : len(reply)-2]), nil
	}
	return string(reply), nil
}

// Client is a synchronous connection for setup and inspection commands
// (SCRIPT LOAD, INFO, FLUSHALL), not for load.
type Client struct {
	nc net.Conn
	rd *replyReader
}

// Dial opens a Client to addr, retrying until timeout while the server
// starts.
func Dial(addr string, timeout time.Duration) (*Client, error) {
	deadline := time.Now().Add(timeout)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return &Client{nc: nc, rd: newReplyReader(nc)}, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do runs one command; as for the package-level do.
func (c *Client) Do(args ...string) (string, error) { return do(c.nc, c.rd, args...) }

// Close closes the connection.
func (c *Client) Close() error { return c.nc.Close() }

// InfoField returns one field of INFO section's reply.
func (c *Client) InfoField(section, field string) (string, error) {
	info, err := c.Do("INFO", section)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return v, nil
		}
	}
	return "", errors.New("load: INFO " + section + " has no field " + field)
}
