package vfs

import "path/filepath"

// WriteFileAtomic replaces name with data durably and atomically: data is
// written to name+".tmp", synced, renamed over name, and the folder
// synced, so a crash leaves the old file or the new one, never a mix. A
// failed write leaves the old file (and possibly the .tmp, which the next
// write replaces).
func WriteFileAtomic(fs FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}
