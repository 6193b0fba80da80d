from stoker.cli import main

raise SystemExit(main())
