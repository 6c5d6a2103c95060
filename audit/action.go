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
	// SwitchRestore puts back a state a job recorded before it acted (a
	// staged rollout's revert).
	SwitchRestore Action = "switch.restore"
	SwitchDelete  Action = "switch.delete"
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
	// UserSignIn is a sign-in with a password while single sign-on is
	// configured: break-glass, audited and notified.
	UserSignIn Action = "user.signin"
)

// Actions on a switch's expiry.
const (
	// SwitchRenew extends the expiry of a switch that is on by its max_on.
	SwitchRenew Action = "switch.renew"
)

// Actions on staged rollout plans.
const (
	RolloutCreate  Action = "rollout.create"
	RolloutPause   Action = "rollout.pause"
	RolloutResume  Action = "rollout.resume"
	RolloutAbort   Action = "rollout.abort"
	RolloutAdvance Action = "rollout.advance"
	RolloutDone    Action = "rollout.done"
	RolloutRevert  Action = "rollout.revert"
)

// Actions on auto-trigger rules.
const (
	TriggerCreate     Action = "trigger.create"
	TriggerUpdate     Action = "trigger.update"
	TriggerDelete     Action = "trigger.delete"
	TriggerPause      Action = "trigger.pause"
	TriggerResume     Action = "trigger.resume"
	TriggerConfirm    Action = "trigger.confirm"
	TriggerTransition Action = "trigger.transition"
	TriggerLock       Action = "trigger.lock"
	// TriggerHold: a drill of the app whose fleet signals the rule reads
	// began; the rule holds its evaluation until the drill ends.
	TriggerHold Action = "trigger.hold"
)

// Actions on drills and their runs.
const (
	DrillCreate Action = "drill.create"
	DrillUpdate Action = "drill.update"
	DrillDelete Action = "drill.delete"
	DrillStart  Action = "drill.start"
	DrillAbort  Action = "drill.abort"
	DrillFinish Action = "drill.finish"
	// DrillRun is a person asking for a run (or a dry run) now.
	DrillRun Action = "drill.run"
)

// Actions on notification channels.
const (
	ChannelCreate Action = "channel.create"
	ChannelUpdate Action = "channel.update"
	ChannelDelete Action = "channel.delete"
	// ChannelTest is an admin's test send to a channel.
	ChannelTest Action = "channel.test"
)

// Actions on approval policies and change requests.
const (
	// PolicyUpdate sets an app's approval policy (admins).
	PolicyUpdate   Action = "policy.update"
	RequestCreate  Action = "request.create"
	RequestUpdate  Action = "request.update"
	RequestApprove Action = "request.approve"
	RequestDeny    Action = "request.deny"
	// ReviewClose closes the review of a break-glass with a note.
	ReviewClose Action = "review.close"
)

// FindingAck is a person's acknowledgement of an open finding.
const FindingAck Action = "finding.ack"

// RetentionPrune is the leader's deletion of history older than the
// retention age (server/retention): one event per prune.
const RetentionPrune Action = "retention.prune"

// Drift is the reconciler's repair of an etcd key that differed from the
// database; its before and after are etcd values, not entities.
const Drift Action = "drift"

// Actions lists every action, grouped by entity.
var Actions = []Action{
	SwitchCreate, SwitchUpdate, SwitchOn, SwitchOff, SwitchRollback, SwitchRestore, SwitchDelete,
	LimitCreate, LimitUpdate, LimitOn, LimitOff, LimitDelete,
	UserCreate, UserUpdate, UserPassword, UserSignIn, TokenCreate, TokenRevoke,
	SwitchRenew,
	RolloutCreate, RolloutPause, RolloutResume, RolloutAbort, RolloutAdvance, RolloutDone, RolloutRevert,
	TriggerCreate, TriggerUpdate, TriggerDelete, TriggerPause, TriggerResume, TriggerConfirm, TriggerTransition, TriggerLock, TriggerHold,
	DrillCreate, DrillUpdate, DrillDelete, DrillStart, DrillAbort, DrillFinish, DrillRun,
	ChannelCreate, ChannelUpdate, ChannelDelete, ChannelTest,
	PolicyUpdate, RequestCreate, RequestUpdate, RequestApprove, RequestDeny, ReviewClose,
	FindingAck,
	RetentionPrune,
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
