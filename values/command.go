package values

// Flags describe a command, as Redis's COMMAND reports them and as
// scripting and the server need them.
type Flags uint16

// The flags of a command.
const (
	Write    Flags = 1 << iota // may change the keyspace
	ReadOnly                   // never changes it
	DenyOOM                    // may add memory: refused with OOM over the bound
	Fast                       // O(1) or O(log N)
	NoScript                   // not allowed from scripts
	AllKeys                    // reads or changes every key (KEYS, SCAN, DBSIZE, FLUSHALL)
)

// Command is one command of the package: what COMMAND reports about it and
// which of its arguments are keys. The Commands are immutable: callers
// must not change them.
type Command struct {
	Name     string // lower case
	Arity    int    // Redis's convention: n exact, -n at least n (the name counts)
	Flags    Flags
	FirstKey int // position of the first key, 0 for none
	LastKey  int // position of the last key; -1 for the last argument
	KeyStep  int
	Group    string // COMMAND DOCS group: string, list, hash, sorted-set, generic, server
	Summary  string

	// ACL is the ACL categories COMMAND INFO lists ("@read", "@string",
	// "@fast", ...), Tips its command tips ("nondeterministic_output",
	// "request_policy:multi_shard", ...).
	ACL  []string
	Tips []string
	// Since and Complexity are COMMAND DOCS's fields of the same names.
	Since      string
	Complexity string

	run handler
}
