package keycloak

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// String is the plan as a readable diff; see WriteTo.
func (p *Plan) String() string {
	var sb strings.Builder
	_, _ = p.WriteTo(&sb)
	return sb.String()
}

// WriteTo writes the plan as a readable diff: a summary line, one line per action in the
// order Apply runs them, then the conflicts:
//
//	Keycloak realm "acme": 1 delete_user, 1 update_user, 1 create_user, 1 leave, 1 join; 1 conflict(s)
//	- delete user old
//	~ update user jdoe: email jdoe@a.example→jdoe@b.example
//	+ create user jane in admins, staff
//	< leave jdoe staff
//	> join jdoe admins
//	! conflict user bob: username "bob" is held by Keycloak user … which ssodir does not manage
func (p *Plan) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	header := fmt.Sprintf("Keycloak realm %q: ", p.Realm)
	switch {
	case p.Empty() && len(p.Conflicts) == 0:
		header += "in step, nothing to change"
	default:
		var parts []string
		for _, k := range phases {
			if n := p.Count(k); n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, k))
			}
		}
		if len(parts) == 0 {
			parts = []string{"nothing to change"}
		}
		header += strings.Join(parts, ", ")
		if n := len(p.Conflicts); n > 0 {
			header += fmt.Sprintf("; %d conflict(s)", n)
		}
	}
	fmt.Fprintln(cw, header)
	if p.Refused != nil {
		fmt.Fprintf(cw, "REFUSED: %v\n", p.Refused)
	}
	for _, a := range p.Actions {
		fmt.Fprintln(cw, a.String())
	}
	for _, c := range p.Conflicts {
		fmt.Fprintf(cw, "! conflict %s %s: %s\n", c.Kind, c.Name, c.Reason)
	}
	return cw.n, cw.err
}

// String is the action as one line of a plan.
func (a Action) String() string {
	switch a.Kind {
	case ActionCreateGroup:
		return "+ create group " + a.GroupName
	case ActionUpdateGroup:
		return "~ update group " + a.GroupName + ": " + formatChanges(a.Changes)
	case ActionDeleteGroup:
		return "- delete group " + a.GroupName
	case ActionCreateUser:
		if len(a.Groups) > 0 {
			return "+ create user " + a.Username + " in " + strings.Join(a.Groups, ", ")
		}
		return "+ create user " + a.Username
	case ActionUpdateUser:
		return "~ update user " + a.Username + ": " + formatChanges(a.Changes)
	case ActionDisableUser:
		return "- disable user " + a.Username
	case ActionDeleteUser:
		return "- delete user " + a.Username
	case ActionJoin:
		return "> join " + a.Username + " " + a.GroupName
	case ActionLeave:
		return "< leave " + a.Username + " " + a.GroupName
	}
	return fmt.Sprintf("? %s %s %s", a.Kind, a.Username, a.GroupName)
}

// logLine is the action for an error or a log line, which name users by id only
// (STYLE.md): its kind, the user's directory id, the group's name (which names no person),
// and the fields an update changes without their values.
func (a Action) logLine() string {
	line := string(a.Kind)
	if a.UserID != "" {
		line += " user " + a.UserID
	}
	if a.GroupName != "" {
		line += " group " + a.GroupName
	}
	if len(a.Changes) > 0 {
		fields := make([]string, len(a.Changes))
		for i, c := range a.Changes {
			fields[i] = c.Field
		}
		line += " (" + strings.Join(fields, ", ") + ")"
	}
	return line
}

func formatChanges(ch []Change) string {
	parts := make([]string, len(ch))
	for i, c := range ch {
		parts[i] = c.Field + " " + displayValue(c.Old) + "→" + displayValue(c.New)
	}
	return strings.Join(parts, ", ")
}

func displayValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"→,") && !strings.HasPrefix(s, "[") {
		return strconv.Quote(s)
	}
	return s
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
	return n, err
}
