package audit

// Action names what an event did, "<entity>.<verb>". Every action the
// console records is a constant here, so a new actor or action is added in
// one place and lists (the web UI's audit filter) follow.
type Action string

// Actions on switches.
const (
	SwitchCreate   Action = "switch.create"
	SwitchUpdate   Action = "switch.update"
	SwitchOn       Action = "switch.on"
	SwitchOff      Action = "switch.off"
	SwitchRollback Action = "switch.rollback"
	SwitchDelete   Action = "switch.delete"
)

// Actions on limit rules.
const (
	LimitCreate Action = "limit.create"
	LimitUpdate Action = "limit.update"
	LimitOn     Action = "limit.on"
	LimitOff    Action = "limit.off"
	LimitDelete Action = "limit.delete"
)

// Actions on people and credentials.
const (
	UserCreate   Action = "user.create"
	UserUpdate   Action = "user.update"
	UserPassword Action = "user.password"
	TokenCreate  Action = "token.create"
	TokenRevoke  Action = "token.revoke"
)

// Drift is the reconciler's repair of an etcd key that differed from the
// database; its before and after are etcd values, not entities.
const Drift Action = "drift"

// Actions lists every action, grouped by entity.
var Actions = []Action{
	SwitchCreate, SwitchUpdate, SwitchOn, SwitchOff, SwitchRollback, SwitchDelete,
	LimitCreate, LimitUpdate, LimitOn, LimitOff, LimitDelete,
	UserCreate, UserUpdate, UserPassword, TokenCreate, TokenRevoke,
	Drift,
}

// Entity returns the entity part of the action ("switch" for
// "switch.on"), or the whole action when it has no verb.
func (a Action) Entity() string {
	for i := 0; i < len(a); i++ {
		if a[i] == '.' {
			return string(a[:i])
		}
	}
	return string(a)
}
