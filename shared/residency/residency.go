// Package residency keeps the operator's resident memory to the pages it uses.
//
// Most of a Go operator's resident set is not its heap but its own executable: the code, the
// read-only data and the function tables the runtime walks, mapped from the binary file. When a
// process touches one page of such a mapping, Linux maps up to 16 neighbouring pages of the page
// cache with it ("fault-around"), so a process that uses a scattered tenth of its code ends up
// with most of the file in its resident set. Those pages are the page cache's, shared by every
// process that runs the same file (all the operator pods of one image on a node), but they count
// in each process's RSS and in what a memory request must cover.
//
// Importing the package turns fault-around off for the executable's read-only mappings as early
// as the program's initialisation allows, and Trim, once the program has started, unmaps the
// read-only pages it touched on the way (start-up code, initialisation tables): what the program
// uses afterwards comes back one page at a time, from the page cache, without reading the disk.
// Nothing changes in what the program does or can do; elsewhere than on Linux both are no-ops.
package residency
