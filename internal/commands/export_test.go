package commands

// SetRenameBounds sets how many members a group rename moves and how large its record's
// payload may be, for a test that must not create thousands of users; the returned
// function restores them. Only for tests that do not run in parallel.
func SetRenameBounds(members, recordBytes int) (restore func()) {
	m, r := MaxRenameGroupMembers, maxRenameRecord
	MaxRenameGroupMembers, maxRenameRecord = members, recordBytes
	return func() { MaxRenameGroupMembers, maxRenameRecord = m, r }
}
