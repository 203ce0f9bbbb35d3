# Sourced by both image recipes (../image/build-image.sh and
# ../image-arm64/build-image.sh): the files both images carry live once, in
# files/ here, and count towards each recipe's cache key as if they were in
# the recipe's own files/; this file counts too, since it decides what an
# image holds.

common=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# recipe_key DIR: the cache key of the image that recipe DIR builds: a hash
# of the file names and contents of DIR and of the shared files, in a stable
# order. A file in DIR overrides a shared one of the same name, as in
# copy_recipe_files.
recipe_key() {
    local dir=$1 path
    { (cd "$dir" && find . -type f ! -name '*.swp' -print0)
      (cd "$common" && find ./files ./recipe.sh -type f ! -name '*.swp' -print0); } |
        LC_ALL=C sort -zu |
        while IFS= read -r -d '' path; do
            if [[ -f $dir/$path ]]; then
                (cd "$dir" && sha256sum "$path")
            else
                (cd "$common" && sha256sum "$path")
            fi
        done | sha256sum | cut -c1-16
}

# copy_recipe_files DIR ROOT: the shared files, then recipe DIR's own files,
# copied verbatim into the image's root ROOT.
copy_recipe_files() {
    cp -a "$common/files/." "$2/"
    cp -a "$1/files/." "$2/"
}
