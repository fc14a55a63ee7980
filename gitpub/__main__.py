from gitpub.cli.main import main

raise SystemExit(main())
